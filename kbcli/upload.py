"""Uploading files: which files a command line names, and moving each one through
register (POST .../documents) → presigned PUT → ingestion, with progress.

Every file goes through a presigned PUT, never inline base64: the bytes go straight to
S3 without the 4/3 base64 growth or the API's 7 MiB body limit, the byte progress bar
measures the real transfer, and there is one code path whatever the size. The cost is
one more request per file, which a tiny file does not notice."""
import fnmatch
import glob
import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Optional

from kbcli.client import CliError, Client

TERMINAL = ("PROCESSED", "FAILED")
CHUNK_BYTES = 256 * 1024
GLOB_CHARS = set("*?[")
OUTAGE_SECONDS = 120


@dataclass
class FileResult:
    path: Path
    size: int
    document: Optional[dict] = None  # the API's document view, latest seen
    error: Optional[dict] = None  # {code, message}: refused, not uploaded, or failed ingestion
    uploaded: bool = False

    @property
    def status(self) -> str:
        if self.error is not None and (self.document is None or not self.uploaded):
            return "FAILED"
        return (self.document or {}).get("status") or "FAILED"

    @property
    def done(self) -> bool:
        return self.error is not None or self.status in TERMINAL

    @property
    def failed(self) -> bool:
        return self.status == "FAILED" or self.error is not None

    def as_dict(self) -> dict:
        doc = self.document or {}
        return {"path": str(self.path), "id": doc.get("id"), "filename": doc.get("filename") or self.path.name,
                "status": self.status, "error": self.error or doc.get("error"), "size": self.size,
                "pages": doc.get("pages"), "chunks": doc.get("chunks"), "tokens": doc.get("tokens")}


def _hidden(relative: Path) -> bool:
    return any(part.startswith(".") for part in relative.parts)


def _matches(patterns: list[str], path: Path, relative: Path) -> bool:
    names = (path.name, relative.as_posix())
    return any(fnmatch.fnmatch(name, pattern) for pattern in patterns for name in names)


def collect(paths: Iterable[str], include: list[str], exclude: list[str]) -> list[Path]:
    """Files named, folders walked (recursively, skipping hidden entries) and globs
    expanded; --include/--exclude match a file's name or its path below the folder."""
    found: dict[Path, None] = {}

    def consider(path: Path, relative: Path) -> None:
        if include and not _matches(include, path, relative):
            return
        if exclude and _matches(exclude, path, relative):
            return
        found.setdefault(path.resolve(), None)

    def walk(folder: Path) -> None:
        for root, dirs, files in os.walk(folder):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            for name in sorted(files):
                path = Path(root) / name
                relative = path.relative_to(folder)
                if not _hidden(relative) and path.is_file():
                    consider(path, relative)

    for given in paths:
        path = Path(given).expanduser()
        if path.is_dir():
            walk(path)
        elif path.is_file():
            consider(path, Path(path.name))
        elif GLOB_CHARS & set(given):
            matches = sorted(glob.glob(os.path.expanduser(given), recursive=True))
            if not matches:
                raise CliError("NO_FILES", f"{given}: no file matches", exit_code=2)
            for match in map(Path, matches):
                if match.is_dir():
                    walk(match)
                else:
                    consider(match, Path(match.name))
        else:
            raise CliError("NO_FILES", f"{given}: no such file or folder", exit_code=2)
    if not found:
        raise CliError("NO_FILES", "no files to upload (check the paths and --include/--exclude)", exit_code=2)
    return list(found)


def _chunks(path: Path, on_bytes: Callable[[int], None]):
    with path.open("rb") as handle:
        while block := handle.read(CHUNK_BYTES):
            on_bytes(len(block))
            yield block


def upload_one(client: Client, kb_id: str, item: FileResult, metadata: Optional[dict],
               on_bytes: Callable[[int], None]) -> None:
    """Registers the file and PUTs its bytes; a refusal or a failed PUT is recorded on
    the item (never raised), so one bad file does not stop the others."""
    body: dict = {"filename": item.path.name, "size": item.size}
    if metadata:
        body["metadata"] = metadata
    sent = 0

    def count(n: int) -> None:
        nonlocal sent
        sent += n
        on_bytes(n)

    try:
        answer = client.post(f"/knowledge-bases/{kb_id}/documents", body)
        item.document = answer["document"]
        put = answer.get("upload")
        if put is not None:
            client.put_bytes(put["url"], put.get("headers") or {}, _chunks(item.path, count))
        item.uploaded = True
    except CliError as error:
        if error.code in ("CONNECTION_FAILED", "NO_API_URL", "NO_API_KEY"):
            raise
        item.error = {"code": error.code, "message": error.message}
    except OSError as error:
        item.error = {"code": "UNREADABLE_FILE", "message": f"{item.path}: {error.strerror or error}"}
    finally:
        on_bytes(max(0, item.size - sent))  # what was never sent still completes the byte bar


def upload_all(client: Client, kb_id: str, items: list[FileResult], metadata: Optional[dict],
               concurrency: int, on_bytes: Callable[[int], None]) -> None:
    with ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
        futures = [pool.submit(upload_one, client, kb_id, item, metadata, on_bytes) for item in items]
        for future in futures:
            future.result()


def wait_all(client: Client, kb_id: str, items: list[FileResult], timeout: float, concurrency: int,
             on_done: Callable[[FileResult], None]) -> list[FileResult]:
    """Polls each uploaded document until PROCESSED or FAILED; returns those still
    unfinished when `timeout` seconds have passed. A poll that fails (the API being
    redeployed, a 503) is asked again next round, unless polls keep failing for
    OUTAGE_SECONDS."""
    for item in items:
        if item.done:
            on_done(item)
    pending = [i for i in items if not i.done]
    deadline, delay, failing_since = time.monotonic() + timeout, 0.5, None

    def poll(item: FileResult) -> Optional[CliError]:
        try:
            item.document = client.get(f"/knowledge-bases/{kb_id}/documents/{item.document['id']}")
        except CliError as error:
            if error.code == "NOT_FOUND":  # the API's own 404: deleted meanwhile
                item.error = {"code": error.code, "message": error.message}
                return None
            return error
        return None

    with ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
        while pending and time.monotonic() < deadline:
            time.sleep(delay)
            delay = min(delay * 1.5, 3.0)
            errors = [e for e in pool.map(poll, pending) if e is not None]
            if errors and len(errors) == len(pending):
                failing_since = failing_since or time.monotonic()
                if time.monotonic() - failing_since > OUTAGE_SECONDS:
                    raise errors[-1]
            else:
                failing_since = None
            still = []
            for item in pending:
                if item.done:
                    on_done(item)
                else:
                    still.append(item)
            pending = still
    return pending


@dataclass
class Plan:
    items: list[FileResult] = field(default_factory=list)

    @classmethod
    def of(cls, files: list[Path]) -> "Plan":
        """The API names a document by the file's name alone, so two files of the same
        name in different folders would overwrite each other: the later ones are refused."""
        plan, seen = cls(), {}
        for path in files:
            item = FileResult(path=path, size=path.stat().st_size)
            if not os.access(path, os.R_OK):
                item.error = {"code": "UNREADABLE_FILE", "message": f"{path}: permission denied"}
            elif path.name in seen:
                item.error = {"code": "DUPLICATE_FILENAME",
                              "message": f"{seen[path.name]} has the same name; the later file would replace it"}
            else:
                seen[path.name] = path
            plan.items.append(item)
        return plan

    @property
    def to_send(self) -> list[FileResult]:
        return [i for i in self.items if i.error is None]
