"""Where the API is and which key to use: an option, else the environment, else the
nearest `.kb/local.env` above the working directory (what `make up` writes)."""
import os
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

LOCAL_ENV = Path(".kb") / "local.env"


@dataclass(frozen=True)
class Settings:
    api_url: Optional[str]
    api_key: Optional[str]
    env_file: Optional[Path]  # the local.env that was read, if any


def find_env_file(start: Optional[Path] = None) -> Optional[Path]:
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        candidate = folder / LOCAL_ENV
        if candidate.is_file():
            return candidate
    return None


def read_env_file(path: Path) -> dict[str, str]:
    """NAME=value lines, as a shell reads them: `export ` before the name, quoted values
    (what `make up` writes: `source .kb/local.env` exports them), comments."""
    values = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            words = shlex.split(line, comments=True)
        except ValueError:  # an unbalanced quote: not a line of ours
            continue
        if words[:1] == ["export"]:
            words = words[1:]
        for word in words:
            name, equals, value = word.partition("=")
            if equals and name.isidentifier():
                values[name] = value
    return values


def resolve(api_url: Optional[str] = None, api_key: Optional[str] = None) -> Settings:
    env_file = find_env_file()
    try:
        from_file = read_env_file(env_file) if env_file else {}
    except OSError:
        from_file, env_file = {}, None

    def pick(given: Optional[str], name: str) -> Optional[str]:
        return given or os.environ.get(name) or from_file.get(name) or None

    url = pick(api_url, "KB_API_URL")
    return Settings(api_url=url.rstrip("/") if url else None, api_key=pick(api_key, "KB_API_KEY"),
                    env_file=env_file)
