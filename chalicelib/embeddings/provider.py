from typing import Protocol, Sequence


class EmbeddingProvider(Protocol):
    name: str
    model: str
    dimension: int

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]: ...

    def embed_query(self, text: str) -> list[float]: ...


_providers: dict[str, EmbeddingProvider] = {}


def get_provider(name: str = "local") -> EmbeddingProvider:
    """The provider by name, created once per warm worker (loading a model is slow)."""
    if name not in _providers:
        if name == "local":
            from chalicelib.embeddings.local import LocalMiniLM
            _providers[name] = LocalMiniLM()
        else:
            raise ValueError(f"unknown embedding provider {name!r}; known: local")
    return _providers[name]
