"""A local server that speaks the OpenAI chat-completions protocol, for the agent
conversation test: asked with tools, it calls the first search tool with the
user's question; given a tool result, it answers from it. It records every request."""
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class ChatServer:
    def __init__(self):
        self.requests = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append(body)
                self._answer(server.reply(body))

            def _answer(self, payload):
                data = json.dumps(payload).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @staticmethod
    def reply(body: dict) -> dict:
        messages = body["messages"]
        last = messages[-1]
        if last["role"] == "tool":
            result = json.loads(last["content"])
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
        return {"id": "chatcmpl-local", "object": "chat.completion", "created": int(time.time()),
                "model": body["model"], "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()
