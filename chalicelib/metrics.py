"""CloudWatch metrics of the search service, as EMF lines (CloudWatch turns them into metrics)."""
from aws_lambda_powertools.metrics import MetricUnit, single_metric

METRICS_NAMESPACE = "KnowledgeBaseService"


def count_lookup(hit: bool, provider: str) -> None:
    """One count per query-embedding cache lookup, by provider."""
    name = "QueryEmbeddingCacheHit" if hit else "QueryEmbeddingCacheMiss"
    with single_metric(name=name, unit=MetricUnit.Count, value=1, namespace=METRICS_NAMESPACE) as metric:
        metric.add_dimension(name="provider", value=provider)


def record_search(strategy: str, took_ms: float) -> None:
    """Service-side latency of one search, by strategy."""
    with single_metric(name="SearchLatency", unit=MetricUnit.Milliseconds, value=took_ms,
                       namespace=METRICS_NAMESPACE) as metric:
        metric.add_dimension(name="strategy", value=strategy)
