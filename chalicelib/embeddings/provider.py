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
