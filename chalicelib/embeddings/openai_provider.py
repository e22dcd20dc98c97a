"""OpenAI embeddings through the official client, or any server that speaks its
protocol (OPENAI_BASE_URL). Batches stay inside the API's limits; 429s and 5xx
are retried with exponential backoff and full jitter."""
import logging
import os
import random
import time
from typing import Callable, Sequence

import openai

from chalicelib.errors import Invalid, Transient

logger = logging.getLogger(__name__)

DIMENSIONS = {"text-embedding-3-small": 1536, "text-embedding-3-large": 3072, "text-embedding-ada-002": 1536}
MAX_INPUTS_PER_REQUEST = 2048
# The API caps a request at 300k tokens. Its tokenizer (cl100k, byte-level BPE) is not here; a
# text's UTF-8 bytes never undercount its tokens (ingestion/context.py, window_bytes), so a
# request is filled up to that many bytes.
MAX_TOKENS_PER_REQUEST = 300_000


class OpenAIEmbeddings:
    name = "openai"
    default_model = "text-embedding-3-small"
    models = tuple(DIMENSIONS)

    def __init__(self, model: str = default_model, *, client=None, max_attempts: int = 6,
                 base_delay: float = 0.5, max_delay: float = 20.0,
                 sleep: Callable[[float], None] = time.sleep):
        if client is None and not os.environ.get("OPENAI_API_KEY"):
            raise Invalid("embedding.provider: openai is not configured here (OPENAI_API_KEY is not set)")
        self.model, self.dimension = model, DIMENSIONS[model]
        # Retries are ours (jitter, metrics-friendly logs), so the client's are off.
        self._client = client or openai.OpenAI(base_url=os.environ.get("OPENAI_BASE_URL") or None,
                                               max_retries=0, timeout=60)
        self.max_attempts, self.base_delay, self.max_delay = max_attempts, base_delay, max_delay
        self._sleep = sleep

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        vectors: list[list[float]] = []
        for batch in self.batches(list(texts)):
            vectors.extend(self._embed_with_retry(batch))
        return vectors

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]

    @staticmethod
    def batches(texts: list[str]) -> list[list[str]]:
        out, current, tokens = [], [], 0
        for text, n in zip(texts, (len(t.encode("utf-8")) for t in texts)):
            if current and (len(current) >= MAX_INPUTS_PER_REQUEST or tokens + n > MAX_TOKENS_PER_REQUEST):
                out.append(current)
                current, tokens = [], 0
            current.append(text)
            tokens += n
        if current:
            out.append(current)
        return out

    def _embed_with_retry(self, batch: list[str]) -> list[list[float]]:
        for attempt in range(1, self.max_attempts + 1):
            try:
                response = self._client.embeddings.create(model=self.model, input=batch)
                return [item.embedding for item in sorted(response.data, key=lambda d: d.index)]
            except (openai.RateLimitError, openai.InternalServerError, openai.APIConnectionError,
                    openai.APITimeoutError) as exc:
                if attempt == self.max_attempts:
                    logger.warning("OpenAI embeddings failed %d times, giving up: %s", attempt, exc)
                    raise Transient(f"the embedding provider did not answer ({type(exc).__name__},"
                                    f" {attempt} attempts)") from exc
                delay = random.uniform(0, min(self.max_delay, self.base_delay * 2 ** (attempt - 1)))
                logger.warning("OpenAI embeddings failed (%s), attempt %d; retrying in %.2fs",
                               type(exc).__name__, attempt, delay)
                self._sleep(delay)
        raise AssertionError("unreachable")
