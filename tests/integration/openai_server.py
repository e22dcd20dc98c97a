"""A local server that speaks the OpenAI embeddings protocol, for tests: the real
`openai` client talks to it. Vectors are deterministic bag-of-words hashes, so
texts that share words are close. It can be told to fail the next requests."""
import hashlib
import json
import math
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def fake_embedding(text: str, dim: int) -> list[float]:
    vector = [0.0] * dim
    for word in text.lower().split():
        digest = hashlib.sha256(word.strip(".,:;!?").encode()).digest()
        vector[int.from_bytes(digest[:4], "little") % dim] += 1.0
    norm = math.sqrt(sum(x * x for x in vector)) or 1.0
    return [x / norm for x in vector]


class OpenAIEmbeddingServer:
    def __init__(self, dim: int = 1536):
        self.dim, self.requests, self.failures = dim, [], []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append(body)
                if server.failures:
                    status = server.failures.pop(0)
                    self._answer(status, {"error": {"message": "try later", "type": "rate_limit", "code": None}})
                    return
                inputs = body["input"] if isinstance(body["input"], list) else [body["input"]]
                self._answer(200, {"object": "list", "model": body["model"],
                                   "data": [{"object": "embedding", "index": i,
                                             "embedding": fake_embedding(t, server.dim)}
                                            for i, t in enumerate(inputs)],
                                   "usage": {"prompt_tokens": 1, "total_tokens": 1}})

            def _answer(self, status, payload):
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()
