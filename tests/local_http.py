"""Servers on a free loopback port for tests: a JSON-over-HTTP one that stands in for a
paid API with a local server speaking its protocol (subclasses answer `reply`), and one
that serves pages and files as a web server would."""
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class _LocalServer:
    """Serves `handler` on a free loopback port inside `with`, on a thread of its own."""

    def _serve(self, handler) -> None:
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def address(self, path: str) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}{path}"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


class LocalJsonServer(_LocalServer):
    def __init__(self):
        self.requests: list[dict] = []
        self.paths: list[str] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append(body)
                server.paths.append(self.path)
                status, payload = server.reply(body)
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_PUT = do_POST  # CloudFormation answers a custom resource's ResponseURL with a PUT

        self._serve(Handler)

    def reply(self, body: dict) -> tuple[int, dict]:
        raise NotImplementedError

    @property
    def base_url(self) -> str:
        return self.address("/v1")


class LocalPageServer(_LocalServer):
    """Pages and files on a free loopback port, as a web server would answer them: each path
    maps to (status, headers, body); anything else is a 404. Records the paths asked for."""

    def __init__(self, pages: dict[str, tuple[int, dict, bytes]]):
        self.pages, self.paths = pages, []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                server.paths.append(self.path)
                status, headers, body = server.pages.get(self.path, (404, {"Content-Type": "text/plain"},
                                                                     b"not found"))
                self.send_response(status)
                for name, value in {"Content-Length": str(len(body)), **headers}.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(body)

        self._serve(Handler)

    def url(self, path: str) -> str:
        return self.address(path)
