"""Agents and their tools: linking knowledge bases, tool definitions for LLM APIs, invocation."""
from chalicelib.agents import service
from chalicelib.agents.invoke import invoke_tool
from chalicelib.agents.tools import FORMATS, ToolError

__all__ = ["FORMATS", "ToolError", "invoke_tool", "service"]
