import os
from typing import Optional, Protocol, Sequence

from chalicelib.errors import Invalid


class EmbeddingProvider(Protocol):
    name: str
    model: str
    dimension: int

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]: ...

    def embed_query(self, text: str) -> list[float]: ...


PROVIDERS = ("local", "openai", "bedrock")
_providers: dict[tuple[str, Optional[str]], EmbeddingProvider] = {}


def get_provider(name: str = "local", model: Optional[str] = None) -> EmbeddingProvider:
    """The provider by name (and model), created once per warm worker: loading a
    model or a client is slow."""
    if name not in PROVIDERS:
        raise Invalid(f"embedding.provider: unknown provider {name!r}; known: {', '.join(PROVIDERS)}")
    if name == "local":
        from chalicelib.embeddings.local import LocalMiniLM as factory
    elif name == "openai":
        from chalicelib.embeddings.openai_provider import OpenAIEmbeddings as factory
    else:
        from chalicelib.embeddings.bedrock_provider import BedrockEmbeddings as factory
    model = model or factory.default_model
    if model not in factory.models:
        raise Invalid(f"embedding.model: {name} offers {', '.join(factory.models)}, not {model!r}")
    if (name, model) not in _providers:
        _providers[(name, model)] = factory(model)
    return _providers[(name, model)]


def check_provider(name: str, timeout: float) -> None:
    """The health check's probe of the deployment's provider: a remote one embeds one word,
    once, without retries, within `timeout`; the local model's files are on disk (loading
    the model is a second of a cold worker's CPU, not a health check's to spend). Raises
    whatever the provider raises; the health check reports it by kind."""
    if name == "local":
        from chalicelib.embeddings.model_files import model_file

        model_file("model.onnx")
        model_file("tokenizer.json")
        return
    if name == "openai":
        import openai

        from chalicelib.embeddings.openai_provider import OpenAIEmbeddings

        client = openai.OpenAI(base_url=os.environ.get("OPENAI_BASE_URL") or None, max_retries=0, timeout=timeout)
        OpenAIEmbeddings(client=client, max_attempts=1).embed_query("health")
    elif name == "bedrock":
        from chalicelib.embeddings.bedrock_provider import BedrockEmbeddings

        BedrockEmbeddings(max_attempts=1).embed_query("health")
    else:
        raise Invalid(f"embedding.provider: unknown provider {name!r}; known: {', '.join(PROVIDERS)}")
