"""Agents and their tools: linking knowledge bases, tool definitions for LLM APIs, invocation."""
from chalicelib.agents import service
from chalicelib.agents.invoke import ToolRun, invoke_tool
from chalicelib.agents.tools import FORMATS

__all__ = ["FORMATS", "ToolRun", "invoke_tool", "service"]
