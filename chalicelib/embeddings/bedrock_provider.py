"""Amazon Titan Text Embeddings v2 through bedrock-runtime InvokeModel. Titan takes
one text per call, so a batch is spread over a small thread pool; throttles, model
timeouts and 5xx are retried with exponential backoff and full jitter. The endpoint
and region come from the usual boto3 environment (AWS_ENDPOINT_URL_BEDROCK_RUNTIME
or AWS_ENDPOINT_URL, AWS_REGION)."""
import json
import logging
import random
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Sequence

import boto3
from botocore import exceptions as botocore_errors
from botocore.config import Config
from botocore.exceptions import ClientError, NoRegionError

from chalicelib.errors import BadUpstream, Invalid, Transient

logger = logging.getLogger(__name__)

TITAN_V2 = "amazon.titan-embed-text-v2:0"
# Titan v2 offers 1024 (its default), 512 and 256 dimensions. A knowledge base
# names the variant as its model ("<model id>/<dimension>") so the per-knowledge-base
# {provider, model} shape stays as it is and each variant has its own cache keys.
MODELS = {TITAN_V2: (TITAN_V2, 1024), f"{TITAN_V2}/512": (TITAN_V2, 512), f"{TITAN_V2}/256": (TITAN_V2, 256)}
# Titan v2 takes at most 8,192 tokens or 50,000 characters per text. Over-long texts
# are refused, not truncated: cutting one would hide part of a passage from semantic
# search without anyone knowing. Chunks are at most chunkTokens long (default 500,
# at most 8000 WordPiece tokens), so only an unusual text or setting gets there. The
# token limit is Bedrock's to enforce with its own tokenizer: its ValidationException
# is raised as it comes, not retried.
MAX_CHARS = 50_000
MAX_CONCURRENCY = 4
RETRYABLE = {"ThrottlingException", "ServiceUnavailableException", "ModelTimeoutException",
             "ModelNotReadyException", "InternalServerException"}
# Connection refused or reset, connect and read timeouts.
TRANSPORT_ERRORS = (botocore_errors.ConnectionError, botocore_errors.HTTPClientError)


class BedrockEmbeddings:
    name = "bedrock"
    default_model = TITAN_V2
    models = tuple(MODELS)

    def __init__(self, model: str = default_model, *, client=None, max_attempts: int = 6,
                 base_delay: float = 0.5, max_delay: float = 20.0,
                 sleep: Callable[[float], None] = time.sleep):
        self.model, (self.model_id, self.dimension) = model, MODELS[model]
        self._client = client or _client()
        self.max_attempts, self.base_delay, self.max_delay = max_attempts, base_delay, max_delay
        self._sleep = sleep

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        texts = list(texts)
        for i, text in enumerate(texts):
            if len(text) > MAX_CHARS:
                raise Invalid(f"embedding: text {i} has {len(text)} characters; "
                                 f"{self.model_id} takes at most {MAX_CHARS}")
        if len(texts) <= 1:
            return [self._embed_with_retry(t) for t in texts]
        pool = ThreadPoolExecutor(max_workers=min(MAX_CONCURRENCY, len(texts)))
        try:
            return list(pool.map(self._embed_with_retry, texts))  # map keeps the input order
        finally:
            pool.shutdown(wait=True, cancel_futures=True)  # after a failure, start no more calls

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]

    def _embed_with_retry(self, text: str) -> list[float]:
        for attempt in range(1, self.max_attempts + 1):
            try:
                return self._embed(text)
            except (ClientError, *TRANSPORT_ERRORS) as exc:
                if not _retryable(exc):
                    raise
                if attempt == self.max_attempts:
                    logger.warning("Bedrock embeddings failed %d times, giving up: %s", attempt, exc)
                    raise Transient(f"the embedding provider did not answer ({_kind(exc)},"
                                    f" {attempt} attempts)") from exc
                delay = random.uniform(0, min(self.max_delay, self.base_delay * 2 ** (attempt - 1)))
                logger.warning("Bedrock embeddings failed (%s), attempt %d; retrying in %.2fs",
                               _kind(exc), attempt, delay)
                self._sleep(delay)
        raise AssertionError("unreachable")

    def _embed(self, text: str) -> list[float]:
        response = self._client.invoke_model(
            modelId=self.model_id, contentType="application/json", accept="application/json",
            body=json.dumps({"inputText": text, "dimensions": self.dimension, "normalize": True}))
        vector = json.loads(response["body"].read()).get("embedding")
        if not isinstance(vector, list) or len(vector) != self.dimension:
            # ministack, for one, answers Titan embedding calls with a text-generation mock.
            raise BadUpstream(f"bedrock-runtime answered {self.model_id} without a "
                              f"{self.dimension}-dimension embedding")  # a 502, not a 500
        return vector


def _client():
    # Retries are ours (jitter, logs), so botocore's are off; the pool fits the threads.
    config = Config(retries={"total_max_attempts": 1}, connect_timeout=5, read_timeout=60,
                    max_pool_connections=MAX_CONCURRENCY)
    try:
        return boto3.client("bedrock-runtime", config=config)
    except NoRegionError:
        raise Invalid("embedding.provider: bedrock is not configured here (no AWS region; "
                      "set AWS_REGION)") from None


def _retryable(exc: Exception) -> bool:
    if not isinstance(exc, ClientError):
        return True
    error = exc.response.get("Error", {})
    status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
    return error.get("Code") in RETRYABLE or status == 429 or status >= 500


def _kind(exc: Exception) -> str:
    return exc.response["Error"].get("Code", "ClientError") if isinstance(exc, ClientError) else type(exc).__name__
