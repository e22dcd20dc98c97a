"""kb docs: uploading documents and following them through ingestion, pages of them,
each one by id or by path; kb sync."""
import re
from enum import Enum
from pathlib import Path, PurePosixPath
from typing import Annotated, Optional

import typer
from rich import filesize
from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeElapsedColumn

from kbcli import output, upload
from kbcli.client import CliError, Client
from kbcli.output import Styled
from kbcli.session import Session, YesOption, command, delete_confirmed, json_option, new_group

app = new_group("docs", "Documents: upload files and folders, list, status, chunks, delete, reindex.")

# --knowledge-base as seed 004's `docs upload` spells it.
KbOption = Annotated[str, typer.Option("--kb", "--knowledge-base", help="The knowledge base's id (kb_…) or name.",
                                       show_default=False)]
DocId = Annotated[str, typer.Argument(help="The document's id (doc_…) or its path in the knowledge base"
                                            " (guides/install/index.html).", show_default=False)]
STATUS_STYLE = {"PROCESSED": "green", "FAILED": "red", "PENDING": "yellow", "PROCESSING": "cyan"}
RESULT_STYLE = {upload.ADDED: "green", upload.UPDATED: "cyan", upload.UNCHANGED: "dim", upload.DELETED: "yellow",
                upload.PROCESSING: "yellow", upload.SKIPPED: "dim", upload.FAILED: "red"}
# A document's or an entry's id as the API makes them (ids.new_id): anything else is a path.
DOCUMENT_ID = re.compile(r"^(doc|entry)_[0-9a-f]{16}$")


class Sort(str, Enum):
    path = "path"
    updatedAt = "updatedAt"
    status = "status"


def docs_path(kb_id: str) -> str:
    return f"/knowledge-bases/{kb_id}/documents"


def document_id(client: Client, kb_id: str, doc: str) -> str:
    """A document's id as given, or the id of the document at this path (?path= answers
    0 or 1 of them)."""
    if DOCUMENT_ID.match(doc):
        return doc
    items = client.get(docs_path(kb_id), params={"path": doc})["items"]
    if len(items) > 1:  # an API that ignores ?path= would answer a page of everything
        raise CliError("UNEXPECTED_ANSWER", f"the API answered {len(items)} documents for the path {doc}")
    if not items:
        raise CliError("NOT_FOUND", f"knowledge base {kb_id} has no document at the path {doc}", status=404)
    return items[0]["id"]


def styled_status(status: Optional[str]) -> Styled:
    return Styled(f"[{STATUS_STYLE.get(status or '', 'white')}]{output.cell(status)}[/]")


def render_doc(doc: dict) -> None:
    error = doc.get("error") or {}
    output.fields([
        ("id", doc["id"]), ("path", doc.get("path")), ("filename", doc.get("filename")),
        ("knowledge base", doc.get("knowledgeBaseId")),
        ("status", styled_status(doc.get("status"))),
        ("error", f"{error.get('code')}: {error.get('message')}" if error else None),
        ("note", doc.get("note")),
        ("type", doc.get("contentType")), ("size", filesize.decimal(doc["size"]) if doc.get("size") else None),
        ("pages", doc.get("pages")), ("chunks", doc.get("chunks")), ("tokens", doc.get("tokens")),
        ("metadata", doc.get("metadata") or None), ("step durations (ms)", doc.get("stepDurationsMs") or None),
        ("content hash", doc.get("contentHash")), ("s3 key", doc.get("s3Key")),
        ("created", output.when(doc.get("createdAt"))), ("updated", output.when(doc.get("updatedAt"))),
        ("processed", output.when(doc.get("processedAt"))),
    ])


def render_docs(data: dict) -> None:
    # An entry has no path: its title (the filename field) stands in.
    output.table(["id", "path", "status", "pages", "chunks", "tokens", "error", "updated"], (
        (d["id"], d.get("path") or d.get("filename"), styled_status(d.get("status")), d.get("pages"),
         d.get("chunks"), d.get("tokens"), (d.get("error") or {}).get("code"), output.when(d.get("updatedAt")))
        for d in data["items"]), empty="no documents")
    if data.get("nextToken"):
        output.note(f"[dim]more: use --all or --next-token {data['nextToken']}[/]")


def summary(results: list[dict]) -> str:
    """'3 added, 1 updated, 40 unchanged, 1 failed' (a count that is 0 is left out)."""
    counts = {name: sum(1 for r in results if r["result"] == name) for name in upload.RESULTS}
    return ", ".join(f"{n} {name}" for name, n in counts.items() if n)


def upload_lines(results: list[dict]) -> list[str]:
    """Seed 004's lines, one a file (`✓ Uploaded: FILE` as its CLI prints them), for a
    script or a log reading stdout: the local file as it was given, what came of it."""
    lines = []
    for r in results:
        if r["result"] == upload.FAILED:
            error = r["error"] or {}
            lines.append(f"✗ Failed: {r['localPath']}: {error.get('code')}: {error.get('message')}")
        elif r["result"] == upload.DELETED:
            lines.append(f"✓ Deleted: {r['path']}")
        elif r["result"] == upload.PROCESSING:
            lines.append(f"… Still processing: {r['localPath']}")
        elif r["result"] == upload.SKIPPED:
            lines.append(f"- Skipped: {r['localPath']}: {_why_skipped(r)}")
        else:
            lines.append(f"✓ {'Unchanged' if r['result'] == upload.UNCHANGED else 'Uploaded'}: {r['localPath']}"
                         + (f" (stored as {r['path']})" if _renamed(r) else ""))
    return lines


def _why_skipped(result: dict) -> str:
    """The API's reason without the file name it starts with ("a PNG image, which is not a supported type")."""
    message = (result["error"] or {}).get("message") or "not a supported type"
    return message.removeprefix(f"{result['filename']}: ")


def _renamed(result: dict) -> bool:
    """The API stored the file at another path than the one asked for (characters S3 and
    shells handle badly become '_')."""
    return bool(result.get("askedPath")) and result["path"] != result["askedPath"]


def shown_path(result: dict) -> str:
    return f"{result['path']} (asked: {result['askedPath']})" if _renamed(result) else result["path"]


def render_upload(results: list[dict], waited: bool) -> None:
    if not output.out.is_terminal:
        for line in upload_lines(results):
            output.out.print(line, markup=False)
        output.note(summary(results))
        return
    output.table(["path", "result", "document", "status", "chunks", "error"], (
        (shown_path(r), Styled(f"[{RESULT_STYLE[r['result']]}]{r['result']}[/]"), r["id"], styled_status(r["status"]),
         r["chunks"],
         Styled(f"[dim]{output.cell(_why_skipped(r))}[/]") if r["result"] == upload.SKIPPED
         else Styled(f"[red]{output.cell(r['error']['code'])}[/]: {output.cell(r['error']['message'])}")
         if r["error"] else None)
        for r in results), title="Upload")
    output.note(summary(results))
    if any(r["result"] == upload.PROCESSING for r in results):
        output.note("[dim]The files still processing go on in the background; `kb docs list` shows them.[/]")
    elif not waited and any(r["status"] in ("PENDING", "PROCESSING") for r in results):
        output.note("[dim]Ingestion goes on in the background; --wait follows it, `kb docs list` shows it.[/]")


def _progress(enabled: bool) -> Progress:
    return Progress(TextColumn("{task.description:<10}"), BarColumn(), TaskProgressColumn(),
                    TextColumn("{task.fields[detail]}"), TimeElapsedColumn(),
                    console=output.err, disable=not enabled, transient=False)


@command(app, "upload")
def upload_(session: Session,
            paths: Annotated[list[str], typer.Argument(help="Files, folders (with -r) and globs.",
                                                       show_default=False)],
            kb: KbOption,
            recursive: Annotated[bool, typer.Option("--recursive", "-r", help="Upload the files in the folders"
                                                    " named, and in their folders (without it a folder is"
                                                    " refused, as cp does).")] = False,
            prefix: Annotated[Optional[str], typer.Option(
                "--prefix", help="Put the files below this folder of the knowledge base (docs/v2).")] = None,
            include: Annotated[Optional[list[str]], typer.Option(
                "--include", help="Only files whose name or path below a folder matches this glob"
                                  " (repeatable).")] = None,
            exclude: Annotated[Optional[list[str]], typer.Option(
                "--exclude", help="Skip files whose name or path below a folder matches this glob"
                                  " (repeatable).")] = None,
            wait: Annotated[bool, typer.Option("--wait", help="Follow ingestion until every document is PROCESSED"
                                                             " or FAILED.")] = False,
            timeout: Annotated[float, typer.Option(help="With --wait, give up after this many seconds.")] = 900,
            metadata: Annotated[Optional[str], typer.Option(
                help="JSON object of metadata attributes for every file (or @file.json).")] = None,
            concurrency: Annotated[int, typer.Option(min=1, max=32, help="Files uploaded at once.")] = 4):
    """Upload files, folders and globs (presigned S3 PUTs), each at its path in the knowledge base.

    A folder's files keep their paths relative to the folder (as `aws s3 sync` does); a file
    named, or matched by a glob, goes under its own name; --prefix puts them below a folder.
    Links to folders are followed; a link back into a folder being walked (a loop) and a
    broken link are left out with a warning. A file found in a folder whose type the service
    does not ingest (an image, an archive) is skipped and listed; named on its own, it fails. A path is stored with the characters S3 and
    shells handle badly as '_' (hot fix?.md as hot fix_.md): the results show it as stored.
    A path that holds the same bytes already is "unchanged" and not sent again.
    Exits 1 when any file was refused, could not be sent, or (with --wait) failed ingestion or was
    still being ingested when the timeout came (it goes on: `kb docs list` follows it)."""
    attributes = json_option(metadata, "--metadata")
    skipped: list[upload.Skipped] = []
    plan = upload.Plan.of(upload.collect(paths, include or [], exclude or [], upload.clean_prefix(prefix),
                                         recursive=recursive, skipped=skipped))
    warn_skipped(session, skipped)
    client = session.client()
    client.get(f"/knowledge-bases/{kb}")  # an unknown knowledge base is one error, not one per file
    results = _send(session, client, kb, plan, attributes, concurrency, wait, timeout)
    session.emit(results, lambda r: render_upload(r, wait))
    if any(item.failed or item.waited_out for item in plan.items):
        raise typer.Exit(1)


def warn_skipped(session: Session, skipped: list[upload.Skipped]) -> None:
    """What a folder walk left out, on stderr (a JSON line each with --json): never silently."""
    for item in skipped:
        output.warn(f"skipped {item.local}: {item.reason}", session.json)


def _send(session: Session, client: Client, kb: str, plan: upload.Plan, attributes: Optional[dict], concurrency: int,
          wait: bool, timeout: float) -> list[dict]:
    """Upload what the plan sends, with a progress bar for people, and follow ingestion with --wait."""
    sending = plan.to_send
    total_bytes = sum(i.size for i in sending)
    with _progress(not session.json) as progress:
        sent = progress.add_task("upload", total=total_bytes, detail="")

        def on_bytes(n: int) -> None:
            progress.advance(sent, n)
            done = progress.tasks[sent].completed
            progress.update(sent, detail=f"{filesize.decimal(int(done))}/{filesize.decimal(total_bytes)}")

        on_bytes(0)
        upload.upload_all(client, kb, sending, attributes, concurrency, on_bytes)
        following = plan.in_flight  # an unchanged file is done, or a run is ingesting it already
        if wait and following:
            ingested = progress.add_task("ingestion", total=len(following), detail="")
            tally = {"PROCESSED": 0, "FAILED": 0}

            def on_done(item: upload.FileResult) -> None:
                tally["FAILED" if item.failed else "PROCESSED"] += 1
                progress.update(ingested, advance=1, detail=f"{tally['PROCESSED']} processed,"
                                                            f" {tally['FAILED']} failed")

            for item in upload.wait_all(client, kb, following, timeout, concurrency, on_done):
                item.waited_out = True
    return [item.as_dict() for item in plan.items]


def sync_folder(session: Session,
                folder: Annotated[Path, typer.Argument(help="The local folder to mirror.", show_default=False,
                                                       exists=True, file_okay=False)],
                kb: KbOption,
                prefix: Annotated[Optional[str], typer.Option(
                    "--prefix", help="Mirror it below this folder of the knowledge base.")] = None,
                include: Annotated[Optional[list[str]], typer.Option(
                    "--include", help="Only paths matching this glob (repeatable).")] = None,
                exclude: Annotated[Optional[list[str]], typer.Option(
                    "--exclude", help="Leave paths matching this glob alone (repeatable).")] = None,
                delete: Annotated[bool, typer.Option("--delete/--no-delete", help="Delete the documents whose"
                                                     " file is gone from the folder.")] = True,
                wait: Annotated[bool, typer.Option("--wait", help="Follow ingestion to the end.")] = False,
                timeout: Annotated[float, typer.Option(help="With --wait, give up after this many seconds.")] = 900,
                concurrency: Annotated[int, typer.Option(min=1, max=32, help="Files uploaded at once.")] = 4):
    """Mirror a local folder into a knowledge base: new and
    changed files are uploaded (by path and content hash: unchanged ones are not sent), and the
    documents below --prefix whose file is gone are deleted, as `aws s3 sync --delete` does.
    What --include/--exclude leave out is neither sent nor deleted."""
    include, exclude, prefix = include or [], exclude or [], upload.clean_prefix(prefix)
    skipped: list[upload.Skipped] = []
    try:
        sources = upload.collect([str(folder)], include, exclude, prefix, recursive=True, skipped=skipped)
    except CliError as error:
        if error.code != "NO_FILES":
            raise
        sources = []  # an empty folder: everything below the prefix goes
    warn_skipped(session, skipped)
    plan = upload.Plan.of(sources)
    client = session.client()
    client.get(f"/knowledge-bases/{kb}")
    local = {item.source.remote for item in plan.items}
    params = {"limit": 1000, "sort": "path", **({"prefix": f"{prefix}/"} if prefix else {})}
    gone = [d for d in client.every(docs_path(kb), params) if d.get("path") and d["path"] not in local
            and upload.selected(PurePosixPath(d["path"][len(prefix) + 1:] if prefix else d["path"]), include, exclude)]
    results = _send(session, client, kb, plan, None, concurrency, wait, timeout) if plan.items else []
    # A file the API stored at another path than its name (`hot fix?.md` as `hot fix_.md`) is still there.
    stored = {item.document.get("path") for item in plan.items if item.document}
    gone = [d for d in gone if d["path"] not in stored]
    failed = any(item.failed or item.waited_out for item in plan.items)
    for doc in gone if delete else []:
        try:
            client.delete(f"{docs_path(kb)}/{doc['id']}")
            results.append({"path": doc["path"], "localPath": None, "result": upload.DELETED, "id": doc["id"],
                            "filename": doc["filename"], "status": "DELETED", "error": None, "size": doc["size"],
                            "pages": None, "chunks": None, "tokens": None})
        except CliError as error:
            failed = True
            results.append({"path": doc["path"], "localPath": None, "result": upload.FAILED, "id": doc["id"],
                            "filename": doc["filename"], "status": "FAILED", "error": error.as_dict(),
                            "size": doc["size"], "pages": None, "chunks": None, "tokens": None})
    session.emit(results, lambda r: render_upload(r, wait))
    if failed:
        raise typer.Exit(1)


@command(app, "list")
def list_(session: Session, kb: KbOption,
          status: Annotated[Optional[str], typer.Option(
              help="Only documents in this status: PENDING, PROCESSING, PROCESSED (or completed) or FAILED,"
                   " in any case.")] = None,
          prefix: Annotated[Optional[str], typer.Option(
              help="Only paths that start with this (a folder: guides/).")] = None,
          sort: Annotated[Sort, typer.Option(help="path (byte order), updatedAt (newest first) or status"
                                                  " (then path).")] = Sort.path,
          limit: Annotated[Optional[int], typer.Option(
              min=1, max=1000, help="Documents a page (the API's default: 100).")] = None,
          next_token: Annotated[Optional[str], typer.Option(
              "--next-token", help="The page after the one that printed this token (same sort and filters).")]
          = None,
          all_: Annotated[bool, typer.Option("--all", help="Every page, to the end (--limit documents a"
                                                           " request).")] = False):
    """List a knowledge base's documents, a page at a time (--all for every page)."""
    client = session.client()
    params = {"status": status, "prefix": prefix, "sort": sort.value,
              "limit": limit, "nextToken": next_token}
    data = ({"items": client.every(docs_path(kb), params), "nextToken": None} if all_
            else client.get(docs_path(kb), params=params))
    session.emit(data, render_docs)


@command(app, "status")
def status(session: Session, doc: DocId, kb: KbOption):
    """Show a document (by id or path): status, error code, pages, chunks, tokens, step durations."""
    client = session.client()
    session.emit(client.get(f"{docs_path(kb)}/{document_id(client, kb, doc)}"), render_doc)


def render_chunks(data: dict) -> None:
    def preview(text: str) -> str:
        line = " ".join(text.split())
        return line if len(line) <= 60 else line[:59] + "…"
    output.table(["#", "id", "page", "section", "offsets", "tokens", "text"], (
        (c["chunkIndex"], c["chunkId"], c.get("page"), c.get("section"),
         f"{c['startOffset']}–{c['endOffset']}", c.get("tokens"), preview(c.get("content") or ""))
        for c in data["items"]), empty="no chunks")
    if data.get("nextToken"):
        output.note(f"[dim]more: use --all or --next-token {data['nextToken']}[/]")


@command(app, "chunks")
def chunks(session: Session, doc: DocId, kb: KbOption,
           limit: Annotated[Optional[int], typer.Option(
               min=1, max=50, help="Chunks a page (the API's default: 20).")] = None,
           next_token: Annotated[Optional[str], typer.Option(
               "--next-token", help="The page after the one that printed this token.")] = None,
           all_: Annotated[bool, typer.Option("--all", help="Every page, to the end.")] = False):
    """List a document's chunks (by id or path) in order: text, page, section and offsets in the document's text."""
    client = session.client()
    path = f"{docs_path(kb)}/{document_id(client, kb, doc)}/chunks"
    params = {"limit": limit, "nextToken": next_token}
    data = ({"items": client.every(path, params), "nextToken": None} if all_
            else client.get(path, params=params))
    session.emit(data, render_chunks)


@command(app, "delete")
def delete(session: Session, doc: DocId, kb: KbOption, yes: YesOption = False):
    """Delete a document (by id or path), its chunks and its object in the bucket."""
    doc_id = document_id(session.client(), kb, doc)
    shown = doc if doc == doc_id else f"{doc} ({doc_id})"
    delete_confirmed(session, yes, f"Delete document {shown}?", f"{docs_path(kb)}/{doc_id}")


@command(app, "reindex")
def reindex(session: Session, doc: DocId, kb: KbOption):
    """Run a document (by id or path) through the pipeline again (embedding anew)."""
    client = session.client()
    session.emit(client.post(f"{docs_path(kb)}/{document_id(client, kb, doc)}/reindex"), render_doc)


def sync(session: Session, kb: KbOption):
    """Compare the bucket with a knowledge base.

    Objects without a document are ingested, changed ones again; documents whose object is gone are removed."""
    data = session.client().post(f"/knowledge-bases/{kb}/sync")
    session.emit(data, lambda d: output.fields(
        [(name, d.get(name)) for name in ("added", "changed", "removed", "unchanged", "failed")]))
