"""Amazon Bedrock's Retrieve (bedrock-agent-runtime, POST /knowledgebases/{knowledgeBaseId}/retrieve)
on the product's knowledge bases: the request's RetrievalFilter is the grammar the product's
search already speaks, overrideSearchType picks the strategy, rerankingConfiguration the
product's reranker, and nextToken pages through the search's results. RetrieveAndGenerate
answers from the deployment's chat model, or 501 when none is configured. Errors are
Bedrock's: the x-amzn-ErrorType header names the exception boto3 raises."""
import base64
import binascii
import hashlib
import json
import re
import uuid
from typing import Any, Optional

from chalicelib import errors, limits
from chalicelib.auth import Principal
from chalicelib.config import load_settings
from chalicelib.errors import Invalid
from chalicelib.ingestion.objects import document_key
from chalicelib.retrieval import Passage, SearchRequest, search
from chalicelib.retrieval.request import parse_filter
from chalicelib.storage.filters import SearchFilters
from chalicelib.validate import int_field, refuse_unknown

SEARCH_TYPES = {"HYBRID": "hybrid", "SEMANTIC": "semantic"}
RETRIEVE_FIELDS = ("retrievalQuery", "retrievalConfiguration", "nextToken", "guardrailConfiguration")
VECTOR_FIELDS = ("numberOfResults", "overrideSearchType", "filter", "rerankingConfiguration",
                 "implicitFilterConfiguration")
UNSUPPORTED = {
    "guardrailConfiguration": "guardrails are not applied by this service; leave guardrailConfiguration out",
    "implicitFilterConfiguration": "implicit filters (a model writing the filter) are not supported; give a filter",
    "managedSearchConfiguration": "managed search is not supported; use vectorSearchConfiguration",
}
_VECTOR = "retrievalConfiguration.vectorSearchConfiguration"
KB_ARN = re.compile(r"arn:aws[a-z-]*:bedrock:[a-z0-9-]*:[0-9]*:knowledge-base/([A-Za-z0-9_-]+)")

# The product's error kinds as Bedrock's exceptions (status, x-amzn-ErrorType). A missing or
# bad key is AccessDeniedException: Bedrock has no 401, and boto3 knows no such class.
_EXCEPTIONS = {400: "ValidationException", 401: "AccessDeniedException", 403: "AccessDeniedException",
               404: "ResourceNotFoundException", 405: "ValidationException", 409: "ConflictException",
               413: "ValidationException", 415: "ValidationException", 429: "ThrottlingException",
               501: "NotImplementedException", 502: "BadGatewayException",
               503: "ServiceUnavailableException"}
_STATUSES = {401: 403, 405: 400, 413: 400, 415: 400}


def error_shape(err: errors.ServiceError, status: int) -> tuple[int, str, dict]:
    """(the status, the x-amzn-ErrorType, the body {"message"}) Bedrock would answer."""
    kind = _EXCEPTIONS.get(status, "InternalServerException")
    return _STATUSES.get(status, status), kind, {"message": err.message}


class NotImplementedHere(errors.ServiceError):
    """501: the operation exists in Bedrock and not in this deployment."""
    code = "NOT_IMPLEMENTED"


def kb_id_of(value: str) -> str:
    """A knowledge base id, or a Bedrock knowledge-base ARN ending in one."""
    if not value.startswith("arn:"):
        return value
    match = KB_ARN.fullmatch(value)
    if match is None:
        raise Invalid.field("knowledgeBaseId", "must be a knowledge base id (kb_...) or a Bedrock knowledge-base"
                                               " ARN ending in one (arn:aws:bedrock:REGION:ACCOUNT:knowledge-base/kb_...)")
    return match.group(1)


def _digest(*parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]


def encode_token(kb_id: str, offset: int, digest: str) -> str:
    raw = json.dumps([kb_id, offset, digest], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def decode_token(token: Optional[str], kb_id: str, digest: str) -> int:
    """The offset a nextToken carries; one of another knowledge base or request is a ValidationException."""
    if token is None:
        return 0
    if not isinstance(token, str):
        raise Invalid.field("nextToken", "must be a string")
    try:
        data = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
    except (binascii.Error, ValueError, UnicodeDecodeError):
        raise Invalid.field("nextToken", "is not a token this API returned") from None
    if (not isinstance(data, list) or len(data) != 3 or not isinstance(data[1], int)
            or not 0 < data[1] < limits.TOP_K.high):
        raise Invalid.field("nextToken", "is not a token this API returned")
    if data[0] != kb_id or data[2] != digest:
        raise Invalid.field("nextToken", "was returned for another knowledge base or another query;"
                                         " send the same retrievalQuery and retrievalConfiguration with it")
    return data[1]


def _rerank(value: Any) -> Optional[int]:
    """rerankingConfiguration: the product's reranker (retrieval/rerank.py) with its model; the
    number of results it keeps (numberOfRerankedResults), or None for numberOfResults."""
    from chalicelib.retrieval.rerank import _model_arn

    where = f"{_VECTOR}.rerankingConfiguration"
    if not isinstance(value, dict) or value.get("type") != "BEDROCK_RERANKING_MODEL":
        raise Invalid.field(f"{where}.type", "must be BEDROCK_RERANKING_MODEL")
    refuse_unknown(value, ("type", "bedrockRerankingConfiguration"), "is not supported", prefix=f"{where}.")
    config = value.get("bedrockRerankingConfiguration") or {}
    if not isinstance(config, dict):
        raise Invalid.field(f"{where}.bedrockRerankingConfiguration", "must be an object")
    refuse_unknown(config, ("modelConfiguration", "numberOfRerankedResults", "metadataConfiguration"),
                   "is not supported", prefix=f"{where}.bedrockRerankingConfiguration.")
    metadata = config.get("metadataConfiguration")
    if metadata not in (None, {"selectionMode": "ALL"}):
        raise Invalid.field(f"{where}.bedrockRerankingConfiguration.metadataConfiguration",
                            "only selectionMode ALL is supported (the reranker reads the passage's text)")
    model = (config.get("modelConfiguration") or {}).get("modelArn")
    ours = _model_arn()
    if model and model.rsplit("/", 1)[-1] != ours.rsplit("/", 1)[-1]:
        raise Invalid.field(f"{where}.bedrockRerankingConfiguration.modelConfiguration.modelArn",
                            f"this deployment reranks with {ours} (RERANK_MODEL_ARN); name it or leave it out")
    count = config.get("numberOfRerankedResults")
    return int_field(count, "numberOfRerankedResults", limits.BEDROCK_RESULTS) if count is not None else None


def retrieve_request(kb_id: str, body: dict) -> tuple[SearchRequest, int, int, str]:
    """(the product's search for the results up to this page, the page's offset, its size, the
    digest of the request a nextToken must carry)."""
    refuse_unknown(body, RETRIEVE_FIELDS, f"is not a field of Retrieve ({', '.join(RETRIEVE_FIELDS)})")
    if body.get("guardrailConfiguration") is not None:
        raise Invalid.field("guardrailConfiguration", UNSUPPORTED["guardrailConfiguration"])
    query = body.get("retrievalQuery")
    if not isinstance(query, dict):
        raise Invalid.field("retrievalQuery", "is required: {\"text\": \"...\"}")
    refuse_unknown(query, ("text", "type"), "is not supported: the query is text", prefix="retrievalQuery.")
    if query.get("type") not in (None, "TEXT"):
        raise Invalid.field("retrievalQuery.type", "only TEXT queries are supported")
    text = query.get("text")
    if not isinstance(text, str) or not text.strip():
        raise Invalid.field("retrievalQuery.text", "is required")
    if len(text) > limits.QUERY_MAX_CHARS:
        raise Invalid.field("retrievalQuery.text", f"must be at most {limits.QUERY_MAX_CHARS} characters")
    config = body.get("retrievalConfiguration") or {}
    if not isinstance(config, dict):
        raise Invalid.field("retrievalConfiguration", "must be an object")
    for name in config:
        if name in UNSUPPORTED:
            raise Invalid.field(f"retrievalConfiguration.{name}", UNSUPPORTED[name])
    refuse_unknown(config, ("vectorSearchConfiguration",), "is not supported", prefix="retrievalConfiguration.")
    vector = config.get("vectorSearchConfiguration") or {}
    if not isinstance(vector, dict):
        raise Invalid.field(_VECTOR, "must be an object")
    if vector.get("implicitFilterConfiguration") is not None:
        raise Invalid.field(f"{_VECTOR}.implicitFilterConfiguration", UNSUPPORTED["implicitFilterConfiguration"])
    refuse_unknown(vector, VECTOR_FIELDS, f"is not a field of vectorSearchConfiguration ({', '.join(VECTOR_FIELDS)})",
                   prefix=f"{_VECTOR}.")
    size = int_field(vector.get("numberOfResults"), f"{_VECTOR}.numberOfResults", limits.BEDROCK_RESULTS)
    search_type = vector.get("overrideSearchType")
    if search_type is not None and search_type not in SEARCH_TYPES:
        raise Invalid.field(f"{_VECTOR}.overrideSearchType", f"must be one of {', '.join(SEARCH_TYPES)}")
    reranked = _rerank(vector["rerankingConfiguration"]) if vector.get("rerankingConfiguration") is not None else None
    rerank = True if vector.get("rerankingConfiguration") is not None else None  # None: the knowledge base's
    if reranked is not None:
        size = min(size, reranked)
    expression = parse_filter(vector["filter"], f"{_VECTOR}.filter") if vector.get("filter") is not None else None
    digest = _digest(text, vector)
    offset = decode_token(body.get("nextToken"), kb_id, digest)
    request = SearchRequest(
        knowledge_base_ids=(kb_id,), query=text.strip(), top_k=min(offset + size, int(limits.TOP_K.high)),
        strategy=SEARCH_TYPES.get(search_type, limits.DEFAULT_STRATEGY), filters=SearchFilters(expression=expression),
        max_tokens=limits.COMPAT_MAX_TOKENS, rerank=rerank)
    return request, offset, size, digest


def result_view(passage: Passage, bucket: str) -> dict:
    metadata = dict(passage.metadata or {})
    if passage.path is not None:
        uri = f"s3://{bucket}/{document_key(passage.knowledge_base_id, passage.path)}"
        location = {"type": "S3", "s3Location": {"uri": uri}}
        metadata["x-amz-bedrock-kb-source-uri"] = uri
    else:  # a text entry: no object in S3
        location = {"type": "CUSTOM", "customDocumentLocation": {"id": passage.document_id}}
    metadata["x-amz-bedrock-kb-chunk-id"] = f"{passage.document_id}:{passage.chunk_index}"
    metadata["x-amz-bedrock-kb-data-source-id"] = passage.knowledge_base_id
    if passage.page is not None:
        metadata["x-amz-bedrock-kb-document-page-number"] = passage.page
    if passage.also_in:  # other documents holding the same text, or nearly: their source URIs (an entry's id)
        metadata["alsoIn"] = [f"s3://{bucket}/{document_key(a.knowledge_base_id, a.path)}" if a.path is not None
                              else a.document_id for a in passage.also_in]
    return {"content": {"text": passage.content, "type": "TEXT"}, "location": location, "metadata": metadata,
            "score": passage.rerank_score if passage.rerank_score is not None else passage.similarity,
            "documentId": passage.document_id}


def retrieve(principal: Principal, knowledge_base_id: str, body: dict) -> dict:
    kb_id = kb_id_of(knowledge_base_id)
    request, offset, size, digest = retrieve_request(kb_id, body)
    passages = search(principal, request).passages
    page = passages[offset:offset + size]
    answer = {"retrievalResults": [result_view(p, load_settings().bucket) for p in page]}
    end = offset + len(page)
    if len(passages) == request.top_k and end < limits.TOP_K.high and len(page) == size:
        answer["nextToken"] = encode_token(kb_id, end, digest)
    return answer


# ---- RetrieveAndGenerate ------------------------------------------------------------------

GENERATE_PROMPT = ("Answer the user's question from the numbered passages only. If they do not hold the answer,"
                   " say so. Answer JSON: {\"answer\": \"...\"}.\n\nPassages:\n")


def retrieve_and_generate(principal: Principal, body: dict, model=None) -> dict:
    """Retrieve, then the deployment's chat model answers from the passages. No model: 501."""
    from chalicelib.llm import NOT_CONFIGURED, Message, chat_model

    try:
        model = model or chat_model()
    except errors.Unavailable as err:
        if err.code == NOT_CONFIGURED:
            raise NotImplementedHere("RetrieveAndGenerate needs a language model and none is configured for this"
                                  " deployment (LLM_PROVIDER, LLM_MODEL); call Retrieve and generate with your own"
                                  " model") from None
        raise
    refuse_unknown(body, ("input", "retrieveAndGenerateConfiguration", "sessionId", "sessionConfiguration"),
                   "is not supported")
    text = (body.get("input") or {}).get("text") if isinstance(body.get("input"), dict) else None
    if not isinstance(text, str) or not text.strip():
        raise Invalid.field("input.text", "is required")
    config = body.get("retrieveAndGenerateConfiguration") or {}
    if not isinstance(config, dict) or config.get("type") != "KNOWLEDGE_BASE":
        raise Invalid.field("retrieveAndGenerateConfiguration.type", "only KNOWLEDGE_BASE is supported")
    kb_config = config.get("knowledgeBaseConfiguration") or {}
    if not isinstance(kb_config, dict) or not isinstance(kb_config.get("knowledgeBaseId"), str):
        raise Invalid.field("retrieveAndGenerateConfiguration.knowledgeBaseConfiguration.knowledgeBaseId",
                            "is required")
    retrieved = retrieve(principal, kb_config["knowledgeBaseId"], {
        "retrievalQuery": {"text": text},
        **({"retrievalConfiguration": kb_config["retrievalConfiguration"]}
           if kb_config.get("retrievalConfiguration") else {})})["retrievalResults"]
    passages = "\n".join(f"[{i + 1}] {r['content']['text']}" for i, r in enumerate(retrieved))
    answer = model.complete(GENERATE_PROMPT + passages, [Message("user", text)])
    try:
        output = json.loads(answer).get("answer")
    except (ValueError, AttributeError):
        output = None
    if not isinstance(output, str):
        raise errors.BadUpstream("the language model did not answer in the expected shape")
    return {"output": {"text": output}, "sessionId": body.get("sessionId") or str(uuid.uuid4()),
            "citations": [{"generatedResponsePart": {"textResponsePart": {
                "text": output, "span": {"start": 0, "end": max(len(output) - 1, 0)}}},
                "retrievedReferences": [{k: r[k] for k in ("content", "location", "metadata")} for r in retrieved]}]}
