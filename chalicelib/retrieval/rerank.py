"""Re-ordering a search's top candidates with Amazon Bedrock's Rerank API
(bedrock-agent-runtime, through boto3): each passage gets the reranker's relevance
score (Hit.rerank, a passage's `rerankScore`), and the passages are ordered by it. Off
unless a search or a tool asks (`rerank: true`) or a knowledge base searched makes it its
default (`search.rerank`); called from one place, retrieval/search.py. A deployment without
a reranker says RERANKER=none: no knowledge base may then default to it.

The model is RERANK_MODEL_ARN, else Amazon Rerank 1.0 in the function's region. The
endpoint is boto3's: AWS_ENDPOINT_URL_BEDROCK_AGENT_RUNTIME, else AWS_ENDPOINT_URL
(ministack implements Rerank, as a mock that keeps the order it is given)."""
import os
from functools import lru_cache

from chalicelib import limits
from chalicelib.errors import Invalid, Transient, Unavailable
from chalicelib.storage.chunks import Hit

DEFAULT_MODEL = "amazon.rerank-v1:0"


def rerank(query: str, candidates: list[Hit], top_n: int) -> list[Hit]:
    """The best top_n of candidates by the reranker, each with its `rerank` score; the
    rest are left out. Only the first RERANK_CANDIDATES are sent."""
    from botocore.exceptions import BotoCoreError, ClientError

    sent = candidates[:limits.RERANK_CANDIDATES]
    if not sent:
        return []
    try:
        answer = _client().rerank(
            queries=[{"type": "TEXT", "textQuery": {"text": query}}],
            sources=[{"type": "INLINE", "inlineDocumentSource": {"type": "TEXT", "textDocument": {"text": c.content}}}
                     for c in sent],
            rerankingConfiguration={"type": "BEDROCK_RERANKING_MODEL", "bedrockRerankingConfiguration": {
                "numberOfResults": min(top_n, len(sent)), "modelConfiguration": {"modelArn": _model_arn()}}})
    except ClientError as err:
        code = err.response.get("Error", {}).get("Code", "")
        if code in ("ValidationException", "AccessDeniedException", "ResourceNotFoundException"):
            raise Unavailable(f"reranking is not available here ({code}); search without rerank",
                              code="RERANK_UNAVAILABLE") from None
        raise Transient(f"the reranker did not answer ({code}); retry") from None
    except BotoCoreError as err:
        raise Transient(f"the reranker did not answer ({type(err).__name__}); retry") from None
    ranked = []
    for result in answer.get("results", []):
        index = result.get("index")
        if not isinstance(index, int) or not 0 <= index < len(sent):
            raise Transient("the reranker answered an index it was not given; retry")
        ranked.append(sent[index]._replace(rerank=round(float(result.get("relevanceScore", 0.0)), 6)))
    ranked.sort(key=lambda r: -r.rerank)
    return ranked[:top_n]


def _model_arn() -> str:
    arn = os.environ.get("RERANK_MODEL_ARN")
    if arn:
        return arn
    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"
    return f"arn:aws:bedrock:{region}::foundation-model/{DEFAULT_MODEL}"


@lru_cache(maxsize=4)
def _client_for(endpoint: str):
    import boto3
    from botocore.config import Config
    from botocore.exceptions import NoRegionError

    try:
        return boto3.client("bedrock-agent-runtime", config=Config(retries={"total_max_attempts": 2},
                                                                    connect_timeout=5, read_timeout=30))
    except NoRegionError:
        raise Invalid("rerank: no AWS region is configured here") from None


def _client():
    # Keyed by the endpoint boto3 will use, so a test that points it elsewhere gets a new client.
    return _client_for(os.environ.get("AWS_ENDPOINT_URL_BEDROCK_AGENT_RUNTIME") or os.environ.get("AWS_ENDPOINT_URL", ""))
