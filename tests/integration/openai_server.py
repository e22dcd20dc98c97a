"""A local server that speaks the OpenAI embeddings protocol, for tests: the real
`openai` client talks to it. Vectors are deterministic bag-of-words hashes, so
texts that share words are close. It can be told to fail the next requests."""
import hashlib
import math

from tests.local_http import LocalJsonServer


def fake_embedding(text: str, dim: int) -> list[float]:
    vector = [0.0] * dim
    for word in text.lower().split():
        digest = hashlib.sha256(word.strip(".,:;!?").encode()).digest()
        vector[int.from_bytes(digest[:4], "little") % dim] += 1.0
    norm = math.sqrt(sum(x * x for x in vector)) or 1.0
    return [x / norm for x in vector]


class OpenAIEmbeddingServer(LocalJsonServer):
    def __init__(self, dim: int = 1536):
        super().__init__()
        self.dim, self.failures = dim, []

    def reply(self, body: dict) -> tuple[int, dict]:
        if self.failures:
            return self.failures.pop(0), {"error": {"message": "try later", "type": "rate_limit", "code": None}}
        inputs = body["input"] if isinstance(body["input"], list) else [body["input"]]
        return 200, {"object": "list", "model": body["model"],
                     "data": [{"object": "embedding", "index": i, "embedding": fake_embedding(t, self.dim)}
                              for i, t in enumerate(inputs)],
                     "usage": {"prompt_tokens": 1, "total_tokens": 1}}


class OpenAIChatServer(LocalJsonServer):
    """The chat-completions protocol: each request is answered with the next of
    `answers` (text the model would say), the last one again once they run out."""

    def __init__(self, answers: list[str]):
        super().__init__()
        self.answers = list(answers)

    def reply(self, body: dict) -> tuple[int, dict]:
        text = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        return 200, {"id": "chatcmpl-local", "object": "chat.completion", "created": 0, "model": body["model"],
                     "choices": [{"index": 0, "finish_reason": "stop",
                                  "message": {"role": "assistant", "content": text}}],
                     "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}
