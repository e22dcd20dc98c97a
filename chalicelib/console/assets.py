"""The web console's built assets, served by the API at /console (no key needed: the
page itself asks for one). The sources live in the top-level console/ folder; `make
package` (infra/package.py) copies them into this package as `assets/`, and a checkout
that was not packaged (the unit tests) reads them from console/ directly.

Assets are a flat, fixed set of text files; a name outside it is not found, whatever
it spells (no path is ever built from the request beyond a listed name)."""
import os
import shlex
from functools import lru_cache
from pathlib import Path
from typing import Optional

from chalicelib.config import load_settings
from chalicelib.errors import NotFound

_HERE = Path(__file__).resolve().parent
CONTENT_TYPES = {".html": "text/html; charset=utf-8", ".css": "text/css; charset=utf-8",
                 ".js": "text/javascript; charset=utf-8", ".svg": "image/svg+xml"}
INDEX = "index.html"
# The page loads its own scripts and styles only; it talks to this API and, for an
# upload, to the bucket's presigned URL (another origin on AWS; the same one on the
# local emulator, which serves every service on one port).
SECURITY_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Content-Security-Policy": ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:;"
                                " connect-src 'self' https: http://127.0.0.1:* http://localhost:*;"
                                " frame-ancestors 'none'; base-uri 'none'; form-action 'none'"),
}


def assets_dir() -> Path:
    packaged = _HERE / "assets"
    return packaged if packaged.is_dir() else _HERE.parent.parent / "console"


@lru_cache(maxsize=1)
def _listing() -> dict[str, Path]:
    root = assets_dir()
    return {p.name: p for p in sorted(root.iterdir())
            if p.is_file() and p.suffix in CONTENT_TYPES} if root.is_dir() else {}


def asset(name: str) -> tuple[str, str]:
    """(body, content type) of one asset; NotFound for any name that is not one."""
    path = _listing().get(name)
    if path is None:
        raise NotFound(f"the console has no file {name!r}")
    return path.read_text(encoding="utf-8"), CONTENT_TYPES[path.suffix]


def page() -> tuple[str, str]:
    return asset(INDEX)


def settings() -> dict:
    """What the page needs before it has a key: on the local stack only, the demo key
    (the stack names the file that holds it; on AWS the variable is never set)."""
    demo = _demo_key(load_settings().console_demo_key_file)
    return {"demoKey": demo} if demo else {}


def _demo_key(path: str) -> Optional[str]:
    if not path or not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as env_file:
        for line in env_file:
            # `export KB_API_KEY='...'`, as a shell reads it (localstack/stack.py writes it so)
            try:
                words = shlex.split(line, comments=True)
            except ValueError:
                continue
            for word in words[1:] if words[:1] == ["export"] else words:
                name, _, value = word.partition("=")
                if name == "KB_API_KEY" and value:
                    return value
    return None
