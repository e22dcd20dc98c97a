"""Embedding providers behind one interface (local, OpenAI, Bedrock); the local model is the default."""
from chalicelib.embeddings.provider import EmbeddingProvider, get_provider

__all__ = ["EmbeddingProvider", "get_provider"]
