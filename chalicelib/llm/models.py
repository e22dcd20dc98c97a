"""A chat model for the service's own use (knowledge extraction): any OpenAI-compatible
endpoint through the `openai` client, or Amazon Bedrock's Converse API through boto3.

Configured by the environment, nothing by default:
- LLM_PROVIDER: `openai` or `bedrock` (unset: no model; callers answer LLM_NOT_CONFIGURED);
- LLM_MODEL: the model (`gpt-4o-mini`, `anthropic.claude-3-haiku-20240307-v1:0`, …);
- openai: LLM_BASE_URL (else OPENAI_BASE_URL) for any compatible server, LLM_API_KEY (else
  OPENAI_API_KEY); bedrock: the usual boto3 region and credentials
  (AWS_ENDPOINT_URL_BEDROCK_RUNTIME locally).
"""
import os
from dataclasses import dataclass
from typing import Protocol, Sequence

from chalicelib.errors import Invalid, Transient, Unavailable

PROVIDERS = ("openai", "bedrock")
NOT_CONFIGURED = "LLM_NOT_CONFIGURED"


@dataclass(frozen=True)
class Message:
    role: str  # user or assistant
    content: str


class ChatModel(Protocol):
    name: str
    model: str

    def complete(self, system: str, messages: Sequence[Message]) -> str:
        """The model's text answer to the conversation."""


def chat_model() -> ChatModel:
    provider = os.environ.get("LLM_PROVIDER", "").strip().lower()
    model = os.environ.get("LLM_MODEL", "").strip()
    if not provider:
        raise Unavailable("no language model is configured for this deployment: set LLM_PROVIDER"
                          " (openai or bedrock) and LLM_MODEL", code=NOT_CONFIGURED)
    if provider not in PROVIDERS or not model:
        raise Unavailable(f"the language model is misconfigured: LLM_PROVIDER must be one of {', '.join(PROVIDERS)}"
                          " and LLM_MODEL must name a model", code=NOT_CONFIGURED)
    if provider == "openai":
        return OpenAIChat(model)
    return BedrockChat(model)


class OpenAIChat:
    name = "openai"

    def __init__(self, model: str, *, client=None):
        import openai

        key = os.environ.get("LLM_API_KEY") or os.environ.get("OPENAI_API_KEY")
        if client is None and not key:
            raise Unavailable("LLM_PROVIDER is openai but neither LLM_API_KEY nor OPENAI_API_KEY is set",
                              code=NOT_CONFIGURED)
        self.model = model
        self._client = client or openai.OpenAI(
            api_key=key, base_url=os.environ.get("LLM_BASE_URL") or os.environ.get("OPENAI_BASE_URL") or None,
            max_retries=2, timeout=120)

    def complete(self, system: str, messages: Sequence[Message]) -> str:
        import openai

        try:
            response = self._client.chat.completions.create(
                model=self.model, temperature=0, response_format={"type": "json_object"},
                messages=[{"role": "system", "content": system}]
                + [{"role": m.role, "content": m.content} for m in messages])
        except (openai.APIConnectionError, openai.RateLimitError, openai.InternalServerError) as err:
            raise Transient(f"the language model did not answer: {type(err).__name__}") from None
        except openai.APIStatusError as err:
            raise Invalid(f"the language model refused the request: HTTP {err.status_code}",
                          code="LLM_REQUEST_REFUSED") from None
        return response.choices[0].message.content or ""


class BedrockChat:
    name = "bedrock"

    def __init__(self, model: str, *, client=None):
        import boto3
        from botocore.config import Config
        from botocore.exceptions import NoRegionError

        self.model = model
        try:
            self._client = client or boto3.client("bedrock-runtime", config=Config(read_timeout=120))
        except NoRegionError:
            raise Unavailable("LLM_PROVIDER is bedrock but no AWS region is set (AWS_REGION)",
                              code=NOT_CONFIGURED) from None

    def complete(self, system: str, messages: Sequence[Message]) -> str:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            response = self._client.converse(
                modelId=self.model, system=[{"text": system}], inferenceConfig={"temperature": 0},
                messages=[{"role": m.role, "content": [{"text": m.content}]} for m in messages])
        except ClientError as err:
            code = err.response.get("Error", {}).get("Code", "")
            if code in ("ThrottlingException", "ServiceUnavailableException", "ModelTimeoutException",
                        "InternalServerException"):
                raise Transient(f"the language model did not answer: {code}") from None
            raise Invalid(f"the language model refused the request: {code}", code="LLM_REQUEST_REFUSED") from None
        except BotoCoreError as err:
            raise Transient(f"the language model did not answer: {type(err).__name__}") from None
        parts = response.get("output", {}).get("message", {}).get("content", [])
        return "".join(p.get("text", "") for p in parts)
