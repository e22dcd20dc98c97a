"""A chat model for the service's own use (knowledge extraction): chat_model() gives the one
the deployment configures (models.py says how)."""
from chalicelib.llm.models import NOT_CONFIGURED, PROVIDERS, BedrockChat, ChatModel, Message, OpenAIChat, chat_model

__all__ = ["PROVIDERS", "NOT_CONFIGURED", "Message", "ChatModel", "chat_model", "OpenAIChat", "BedrockChat"]
