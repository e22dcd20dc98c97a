"""A local server that speaks bedrock-runtime's InvokeModel protocol for Amazon Titan
Text Embeddings v2, for tests: the real boto3 client talks to it
(AWS_ENDPOINT_URL_BEDROCK_RUNTIME). ministack answers Titan embedding models with a
text-generation mock, so it cannot stand in. Vectors are the deterministic
bag-of-words hashes of openai_server, at the dimension asked for. It can be told
to fail the next requests with a Bedrock error."""
from urllib.parse import unquote

from tests.integration.openai_server import fake_embedding
from tests.local_http import LocalJsonServer

ERROR_STATUS = {"ThrottlingException": 429, "ServiceUnavailableException": 503,
                "ModelTimeoutException": 408, "InternalServerException": 500,
                "ValidationException": 400, "AccessDeniedException": 403}


class TitanEmbeddingServer(LocalJsonServer):
    def __init__(self):
        super().__init__()
        self.failures: list[str] = []

    @property
    def endpoint_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def model_ids(self) -> list[str]:
        """The modelId of each request (/model/{modelId}/invoke)."""
        return [unquote(p.split("/")[2]) for p in self.paths]

    def reply(self, body: dict) -> tuple[int, dict]:
        if self.failures:
            code = self.failures.pop(0)
            return ERROR_STATUS[code], {"__type": code, "message": f"{code} from the test server"}
        if not body.get("inputText"):
            return 400, {"__type": "ValidationException", "message": "inputText is required"}
        vector = fake_embedding(body["inputText"], body.get("dimensions", 1024))
        return 200, {"embedding": vector, "embeddingsByType": {"float": vector},
                     "inputTextTokenCount": len(body["inputText"].split())}


class ConverseServer(LocalJsonServer):
    """bedrock-runtime's Converse protocol (POST /model/{modelId}/converse): each request
    is answered with the next of `answers`, the last one again once they run out."""

    def __init__(self, answers: list[str]):
        super().__init__()
        self.answers = list(answers)

    @property
    def endpoint_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def reply(self, body: dict) -> tuple[int, dict]:
        if not body.get("messages"):
            return 400, {"__type": "ValidationException", "message": "messages are required"}
        text = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        return 200, {"output": {"message": {"role": "assistant", "content": [{"text": text}]}},
                     "stopReason": "end_turn", "usage": {"inputTokens": 1, "outputTokens": 1, "totalTokens": 2},
                     "metrics": {"latencyMs": 1}}


def _words(text: str) -> set[str]:
    return {w.strip(".,:;!?()\"'").lower() for w in text.split()} - {""}


class RerankServer(LocalJsonServer):
    """bedrock-agent-runtime's Rerank protocol (POST /rerank). ministack implements it as
    a mock that keeps the order it is given (scores 1.0, 0.9, …), which no re-ordering
    test can tell from no reranking; this one scores each document by the share of the
    query's words it contains, so the order it answers is knowable."""

    @property
    def endpoint_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def reply(self, body: dict) -> tuple[int, dict]:
        try:
            query = body["queries"][0]["textQuery"]["text"]
            texts = [s["inlineDocumentSource"]["textDocument"]["text"] for s in body["sources"]]
            config = body["rerankingConfiguration"]["bedrockRerankingConfiguration"]
            assert config["modelConfiguration"]["modelArn"].startswith("arn:aws:bedrock:")
        except (KeyError, IndexError, TypeError, AssertionError):
            return 400, {"__type": "ValidationException", "message": "malformed Rerank request"}
        wanted = _words(query)
        scores = [len(wanted & _words(t)) / max(1, len(wanted)) for t in texts]
        order = sorted(range(len(texts)), key=lambda i: (-scores[i], i))[:config.get("numberOfResults", len(texts))]
        return 200, {"results": [{"index": i, "relevanceScore": scores[i]} for i in order]}
