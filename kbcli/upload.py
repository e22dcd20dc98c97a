"""Uploading files: which files a command line names and the path each one gets in the
knowledge base, and moving each one through register (POST .../documents) → presigned
PUT → ingestion, with progress.

A document is its path in the knowledge base. As `aws s3 sync DIR s3://bucket/prefix`
does, a folder's files keep their paths relative to the folder, a file named on its own
(or matched by a glob) is uploaded under its name, and --prefix puts all of them below a
folder. Each registration carries the file's SHA-256: when the path already holds those
bytes, indexed, the API answers "unchanged" and nothing is sent.

Every file goes through a presigned PUT, never inline base64: the bytes go straight to
S3 without the 4/3 base64 growth or the API's 7 MiB body limit, the byte progress bar
measures the real transfer, and there is one code path whatever the size. The cost is
one more request per file, which a tiny file does not notice."""
import base64
import fnmatch
import glob
import hashlib
import os
import time
import unicodedata
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Callable, Iterable, Optional

from kbcli.client import CliError, Client

TERMINAL = ("PROCESSED", "FAILED")
CHUNK_BYTES = 256 * 1024
HEAD_BYTES = 4096  # what the API reads of `head` (its sniff.HEAD_BYTES: tar's magic sits at 257)
GLOB_CHARS = set("*?[")
OUTAGE_SECONDS = 120
# What registering a file did (the API's answer), and what the summary calls a file that
# was refused, could not be sent, or failed ingestion.
ADDED, UPDATED, UNCHANGED, FAILED = "added", "updated", "unchanged", "failed"
DELETED = "deleted"  # kb sync-folder: a document whose file is gone from the folder
PROCESSING = "processing"  # sent, and still being ingested when --wait gave up: not a failure
SKIPPED = "skipped"  # found by a folder walk, of a type the service does not ingest: not a failure
RESULTS = (ADDED, UPDATED, UNCHANGED, DELETED, PROCESSING, SKIPPED, FAILED)


@dataclass(frozen=True)
class Source:
    """One local file and the path it gets in the knowledge base."""
    local: Path
    remote: str
    # Found by walking a folder rather than named: a folder of documentation holds images and
    # archives the service does not read, and those are skipped, not failures.
    walked: bool = False


@dataclass
class FileResult:
    source: Source
    size: int
    document: Optional[dict] = None  # the API's document view, latest seen
    error: Optional[dict] = None  # {code, message}: refused, not uploaded, or failed ingestion
    result: Optional[str] = None  # the API's ADDED, UPDATED or UNCHANGED, once registered
    uploaded: bool = False  # registered, and the bytes sent when there were any to send
    waited_out: bool = False  # --wait gave up on it while it was still PENDING or PROCESSING

    @property
    def sent(self) -> bool:
        """Bytes went to S3 (or inline): ingestion is under way."""
        return self.uploaded and self.result in (ADDED, UPDATED)

    @property
    def skipped(self) -> bool:
        """Walked to, and refused at registration as a type the service does not ingest."""
        return (self.source.walked and not self.uploaded and self.error is not None
                and self.error.get("code") == "UNSUPPORTED_TYPE")

    @property
    def status(self) -> Optional[str]:
        if self.skipped:
            return None  # no document was made
        if self.error is not None and (self.document is None or not self.uploaded):
            return "FAILED"
        return (self.document or {}).get("status") or "FAILED"

    @property
    def done(self) -> bool:
        return self.error is not None or self.waited_out or self.status in TERMINAL

    @property
    def failed(self) -> bool:
        return not self.skipped and (self.status == "FAILED" or self.error is not None)

    @property
    def outcome(self) -> str:
        """What the summary counts this file as: SKIPPED when a walk found a type the service
        refuses, FAILED whenever it failed, PROCESSING when --wait gave up on it, else the API's
        result."""
        if self.skipped:
            return SKIPPED
        if self.failed or not self.uploaded:
            return FAILED
        return PROCESSING if self.waited_out else (self.result or ADDED)

    def as_dict(self) -> dict:
        doc = self.document or {}
        # "path" is the document's path as the API stored it (it may have rewritten the one
        # asked for: `hot fix?.md` is stored as `hot fix_.md`), "askedPath" the one asked for.
        return {"path": doc.get("path") or self.source.remote, "askedPath": self.source.remote,
                "localPath": str(self.source.local),
                "result": self.outcome, "id": doc.get("id"),
                "filename": doc.get("filename") or PurePosixPath(self.source.remote).name,
                "status": self.status, "error": self.error or doc.get("error"), "size": self.size,
                "pages": doc.get("pages"), "chunks": doc.get("chunks"), "tokens": doc.get("tokens")}


def clean_prefix(prefix: Optional[str]) -> str:
    """--prefix as a folder: '/'-separated names without '.' or '..', no leading or
    trailing '/' ('' when none)."""
    if not prefix:
        return ""
    parts = [p for p in prefix.replace("\\", "/").split("/") if p]
    if any(p in (".", "..") for p in parts):
        raise CliError("INVALID_OPTION", f"--prefix {prefix}: '.' and '..' are not folders in a knowledge base",
                       exit_code=2)
    return "/".join(parts)


def remote_path(prefix: str, relative: PurePosixPath) -> str:
    """The document's path: the prefix, then the path relative to the folder given (NFC,
    as the API keeps it, so two spellings of one name are one path)."""
    path = relative.as_posix() if not prefix else f"{prefix}/{relative.as_posix()}"
    return unicodedata.normalize("NFC", path)


def _hidden(relative: Path) -> bool:
    return any(part.startswith(".") for part in relative.parts)


def selected(relative: PurePosixPath, include: list[str], exclude: list[str]) -> bool:
    """Whether a path below the folder is one collect() would take (kb sync-folder asks it of
    the knowledge base's paths: what the filters leave out is neither sent nor deleted)."""
    return (not _hidden(Path(relative.as_posix())) and (not include or _matches(include, relative, relative))
            and not (exclude and _matches(exclude, relative, relative)))


def _matches(patterns: list[str], path: Path, relative: Path) -> bool:
    names = (path.name, relative.as_posix())
    return any(fnmatch.fnmatch(name, pattern) for pattern in patterns for name in names)


@dataclass(frozen=True)
class Skipped:
    """What a folder walk left out and why (a link that loops back, a broken link)."""
    local: Path
    reason: str


def collect(paths: Iterable[str], include: list[str], exclude: list[str], prefix: str = "", *,
            recursive: bool, skipped: Optional[list[Skipped]] = None) -> list[Source]:
    """Files named, folders walked (recursively, skipping hidden entries, following links
    to folders) and globs expanded, each with its remote path; --include/--exclude match a
    file's name or its path below the folder. The same file reached twice at the same path
    counts once. A link to a folder the walk is already inside (a loop) and a broken link
    are left out and added to `skipped`. Without `recursive` a folder is refused, as `cp`
    and `aws s3 cp` refuse one without -r."""
    found: dict[tuple[Path, str], Source] = {}
    left_out: list[Skipped] = [] if skipped is None else skipped

    def folder_allowed(folder: Path) -> None:
        if not recursive:
            raise CliError("IS_A_FOLDER", f"{folder} is a folder: add -r (--recursive) to upload the files"
                                          " in it", exit_code=2)

    def consider(path: Path, relative: Path, walked: bool = False) -> None:
        if include and not _matches(include, path, relative):
            return
        if exclude and _matches(exclude, path, relative):
            return
        source = Source(local=path, remote=remote_path(prefix, PurePosixPath(relative.as_posix())), walked=walked)
        found.setdefault((path.resolve(), source.remote), source)

    def identity(path: Path) -> tuple[int, int]:
        info = path.stat()
        return info.st_dev, info.st_ino

    def walk(folder: Path) -> None:
        # The folders each walked folder lies in (itself included), by identity: a link to
        # one of them would lead round for ever.
        inside = {os.fspath(folder): {identity(folder)}}
        for root, dirs, files in os.walk(folder, followlinks=True):
            kept = []
            for name in sorted(d for d in dirs if not d.startswith(".")):
                path = Path(root) / name
                try:
                    seen = identity(path)
                except OSError as error:
                    left_out.append(Skipped(path, f"cannot read it ({error.strerror or error})"))
                    continue
                if seen in inside[root]:
                    left_out.append(Skipped(path, f"a link to {path.resolve()}, a folder it lies in (a loop)"))
                    continue
                inside[os.path.join(root, name)] = inside[root] | {seen}
                kept.append(name)
            dirs[:] = kept
            for name in sorted(files):
                path = Path(root) / name
                relative = path.relative_to(folder)
                if _hidden(relative):
                    continue
                if path.is_file():
                    consider(path, relative, walked=True)
                elif path.is_symlink() and not path.exists():
                    left_out.append(Skipped(path, f"a broken link (to {os.readlink(path)})"))

    for given in paths:
        path = Path(given).expanduser()
        if path.is_dir():
            folder_allowed(path)
            walk(path)
        elif path.is_file():
            consider(path, Path(path.name))
        elif GLOB_CHARS & set(given):
            matches = sorted(glob.glob(os.path.expanduser(given), recursive=True))
            if not matches:
                raise CliError("NO_FILES", f"{given}: no file matches", exit_code=2)
            for match in map(Path, matches):
                if match.is_dir():
                    folder_allowed(match)
                    walk(match)
                else:
                    consider(match, Path(match.name))
        else:
            raise CliError("NO_FILES", f"{given}: no such file or folder", exit_code=2)
    if not found:
        why = "; ".join(f"{s.local}: {s.reason}" for s in left_out)
        raise CliError("NO_FILES", "no files to upload (check the paths and --include/--exclude)"
                       + (f"; left out: {why}" if why else ""), exit_code=2)
    return list(found.values())


def _chunks(path: Path, on_bytes: Callable[[int], None]):
    with path.open("rb") as handle:
        while block := handle.read(CHUNK_BYTES):
            on_bytes(len(block))
            yield block


def head_of(path: Path) -> str:
    """The file's first HEAD_BYTES, base64: the API tells a binary file from its bytes and
    refuses it at registration, before its bytes are sent, as it does by name."""
    with path.open("rb") as handle:
        return base64.b64encode(handle.read(HEAD_BYTES)).decode("ascii")


def sha256_of(path: Path) -> str:
    """The file's SHA-256, read in blocks (a large file never sits in memory whole)."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(CHUNK_BYTES):
            digest.update(block)
    return digest.hexdigest()


def upload_one(client: Client, kb_id: str, item: FileResult, metadata: Optional[dict],
               on_bytes: Callable[[int], None]) -> None:
    """Registers the file at its path and PUTs its bytes unless the API answers that the
    path holds them already; a refusal or a failed PUT is recorded on the item (never
    raised), so one bad file does not stop the others."""
    sent = 0

    def count(n: int) -> None:
        nonlocal sent
        sent += n
        on_bytes(n)

    try:
        body: dict = {"path": item.source.remote, "size": item.size, "sha256": sha256_of(item.source.local),
                      "head": head_of(item.source.local)}
        if metadata:
            body["metadata"] = metadata
        answer = client.post(f"/knowledge-bases/{kb_id}/documents", body)
        item.document, item.result = answer["document"], answer.get("result")
        put = answer.get("upload")
        if put is not None:
            client.put_bytes(put["url"], put.get("headers") or {}, _chunks(item.source.local, count))
        item.uploaded = True
    except CliError as error:
        if error.code in ("CONNECTION_FAILED", "NO_API_URL", "NO_API_KEY"):
            raise
        item.error = {"code": error.code, "message": error.message}
    except OSError as error:
        item.error = {"code": "UNREADABLE_FILE", "message": f"{item.source.local}: {error.strerror or error}"}
    finally:
        on_bytes(max(0, item.size - sent))  # what was never sent (or is unchanged) still completes the byte bar


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
    def of(cls, sources: list[Source]) -> "Plan":
        """Two local files for one path in one run would make one document of whichever
        PUT landed last: the later file is refused, naming both."""
        plan, seen = cls(), {}
        for source in sources:
            item = FileResult(source=source, size=source.local.stat().st_size)
            if not os.access(source.local, os.R_OK):
                item.error = {"code": "UNREADABLE_FILE", "message": f"{source.local}: permission denied"}
            elif source.remote in seen:
                item.error = {"code": "DUPLICATE_PATH",
                              "message": f"{source.local} maps to {source.remote}, as {seen[source.remote]} does:"
                                         " only the first is uploaded"}
            else:
                seen[source.remote] = source.local
            plan.items.append(item)
        return plan

    @property
    def to_send(self) -> list[FileResult]:
        return [i for i in self.items if i.error is None]

    @property
    def in_flight(self) -> list[FileResult]:
        """What --wait follows: each file sent, and each one the API found unchanged while a run
        was still ingesting those bytes."""
        return [i for i in self.items if i.sent or (i.uploaded and i.error is None and i.status not in TERMINAL)]
