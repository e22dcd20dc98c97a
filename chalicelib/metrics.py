"""CloudWatch metrics of the service, as EMF lines (CloudWatch turns them into metrics).

Beside the service's own, the three seed 004 names (its Prometheus names without the
`compozy_` prefix, seconds as it measures them). Its workspace_id dimension is left out:
one metric per organisation is a CloudWatch custom metric each, billed monthly; the
organisation is in the log line the EMF rides on."""
from dataclasses import dataclass
from typing import Optional

from aws_lambda_powertools.metrics import EphemeralMetrics, MetricUnit, single_metric

METRICS_NAMESPACE = "KnowledgeBaseService"


def count_lookup(hit: bool, provider: str) -> None:
    """One count per query-embedding cache lookup, by provider."""
    name = "QueryEmbeddingCacheHit" if hit else "QueryEmbeddingCacheMiss"
    with single_metric(name=name, unit=MetricUnit.Count, value=1, namespace=METRICS_NAMESPACE) as metric:
        metric.add_dimension(name="provider", value=provider)


@dataclass(frozen=True)
class SearchEvent:
    """Seed 003's retrieval event ("knowledge:searched"). The query travels as a hash only:
    log lines are kept and read more widely than the knowledge bases they search."""
    query_hash: str
    strategy: str
    result_count: int
    average_similarity: Optional[float]  # of the passages' cosine to the query; None when none is known
    took_ms: float
    results_cached: bool
    org_id: str
    knowledge_base_ids: tuple[str, ...]


def record_search(event: SearchEvent) -> None:
    """One structured log line per search: the retrieval event, and its metrics by strategy
    (EMF): SearchLatency (ms) with seed 004's query duration (seconds), SearchResultCount,
    SearchResultsCached (1 or 0, so its average is the hit rate) and SearchAverageSimilarity."""
    line = EphemeralMetrics(namespace=METRICS_NAMESPACE)  # all in one EMF line
    line.add_dimension(name="strategy", value=event.strategy)
    line.add_metric(name="SearchLatency", unit=MetricUnit.Milliseconds, value=event.took_ms)
    line.add_metric(name="knowledge_query_duration_seconds", unit=MetricUnit.Seconds, value=event.took_ms / 1000)
    line.add_metric(name="SearchResultCount", unit=MetricUnit.Count, value=event.result_count)
    line.add_metric(name="SearchResultsCached", unit=MetricUnit.Count, value=int(event.results_cached))
    if event.average_similarity is not None:
        line.add_metric(name="SearchAverageSimilarity", unit=MetricUnit.NoUnit, value=event.average_similarity)
    for name, value in (("event", "knowledge:searched"), ("queryHash", event.query_hash),
                        ("resultCount", event.result_count), ("averageSimilarity", event.average_similarity),
                        ("durationMs", round(event.took_ms, 1)), ("resultsCached", event.results_cached),
                        ("organizationId", event.org_id), ("knowledgeBaseIds", list(event.knowledge_base_ids))):
        line.add_metadata(key=name, value=value)
    line.flush_metrics()


# The upload metric's mime_type is one of these or "other": the caller names the type, and
# each value would be a custom metric of its own, billed monthly.
UPLOAD_TYPES = frozenset({
    "application/pdf", "text/html", "text/markdown", "text/plain", "text/csv", "application/json",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet", "application/octet-stream"})


def record_upload(content_type: str, result: str) -> None:
    """Seed 004's documents uploaded: one per registration, by its type and what came of it
    (added, updated, unchanged)."""
    kind = content_type.split(";")[0].strip().lower()
    with single_metric(name="knowledge_documents_uploaded_total", unit=MetricUnit.Count, value=1,
                       namespace=METRICS_NAMESPACE) as metric:
        metric.add_dimension(name="mime_type", value=kind if kind in UPLOAD_TYPES else "other")
        metric.add_dimension(name="status", value=result)


def record_embedding(provider: str, model: str, seconds: float) -> None:
    """Seed 004's embedding generation duration: one batch of a document's chunks."""
    with single_metric(name="knowledge_embedding_generation_duration_seconds", unit=MetricUnit.Seconds,
                       value=seconds, namespace=METRICS_NAMESPACE) as metric:
        metric.add_dimension(name="provider", value=provider)
        metric.add_dimension(name="model", value=model)


def record_document_failed(code: str) -> None:
    """A document that ended FAILED: DocumentsFailed twice, once for the service (what its alarm
    watches) and once by error code (what the dashboard breaks it down by). The codes are the
    pipeline's own, a short fixed list, so each is one custom metric."""
    with single_metric(name="DocumentsFailed", unit=MetricUnit.Count, value=1, namespace=METRICS_NAMESPACE):
        pass
    with single_metric(name="DocumentsFailed", unit=MetricUnit.Count, value=1,
                       namespace=METRICS_NAMESPACE) as metric:
        metric.add_dimension(name="errorCode", value=code)
