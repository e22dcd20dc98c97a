"""A local server that speaks the OpenAI chat-completions protocol, for the agent
conversation test: asked with tools, it calls the first search tool with the
user's question; given a tool result, it answers from it. It records every request."""
import json
import time

from tests.local_http import LocalJsonServer


class ChatServer(LocalJsonServer):
    def reply(self, body: dict) -> tuple[int, dict]:
        messages = body["messages"]
        if messages[-1]["role"] == "tool":
            result = json.loads(messages[-1]["content"])
            top = result["results"][0]["content"] if result.get("results") else "nothing"
            message = {"role": "assistant", "content": f"According to the knowledge base: {top}"}
            finish = "stop"
        else:
            tool = next(t for t in body["tools"] if t["function"]["name"].startswith("search_"))
            question = next(m["content"] for m in reversed(messages) if m["role"] == "user")
            message = {"role": "assistant", "content": None, "tool_calls": [{
                "id": "call_1", "type": "function",
                "function": {"name": tool["function"]["name"], "arguments": json.dumps({"query": question})}}]}
            finish = "tool_calls"
        return 200, {"id": "chatcmpl-local", "object": "chat.completion", "created": int(time.time()),
                     "model": body["model"], "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                     "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}
