"""kb docs: uploading documents and following them through ingestion; kb sync."""
from enum import Enum
from typing import Annotated, Optional

import typer
from rich import filesize
from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeElapsedColumn

from kbcli import output, upload
from kbcli.output import Styled
from kbcli.session import Session, YesOption, command, delete_confirmed, json_option, new_group

app = new_group("docs", "Documents: upload files and folders, list, status, delete, reindex.")

KbOption = Annotated[str, typer.Option("--kb", help="The knowledge base's id (kb_…).", show_default=False)]
DocId = Annotated[str, typer.Argument(help="The document's id (doc_…).", show_default=False)]
STATUS_STYLE = {"PROCESSED": "green", "FAILED": "red", "PENDING": "yellow", "PROCESSING": "cyan"}


class Status(str, Enum):
    PENDING = "PENDING"
    PROCESSING = "PROCESSING"
    PROCESSED = "PROCESSED"
    FAILED = "FAILED"


def docs_path(kb_id: str) -> str:
    return f"/knowledge-bases/{kb_id}/documents"


def styled_status(status: Optional[str]) -> Styled:
    return Styled(f"[{STATUS_STYLE.get(status or '', 'white')}]{output.cell(status)}[/]")


def render_doc(doc: dict) -> None:
    error = doc.get("error") or {}
    output.fields([
        ("id", doc["id"]), ("filename", doc.get("filename")), ("knowledge base", doc.get("knowledgeBaseId")),
        ("status", styled_status(doc.get("status"))),
        ("error", f"{error.get('code')}: {error.get('message')}" if error else None),
        ("type", doc.get("contentType")), ("size", filesize.decimal(doc["size"]) if doc.get("size") else None),
        ("pages", doc.get("pages")), ("chunks", doc.get("chunks")), ("tokens", doc.get("tokens")),
        ("metadata", doc.get("metadata") or None), ("step durations (ms)", doc.get("stepDurationsMs") or None),
        ("content hash", doc.get("contentHash")), ("s3 key", doc.get("s3Key")),
        ("created", output.when(doc.get("createdAt"))), ("updated", output.when(doc.get("updatedAt"))),
        ("processed", output.when(doc.get("processedAt"))),
    ])


def render_docs(data: dict) -> None:
    output.table(["id", "filename", "status", "pages", "chunks", "tokens", "error", "updated"], (
        (d["id"], d.get("filename"), styled_status(d.get("status")), d.get("pages"), d.get("chunks"),
         d.get("tokens"), (d.get("error") or {}).get("code"), output.when(d.get("updatedAt")))
        for d in data["items"]), empty="no documents")


def render_upload(results: list[dict], waited: bool) -> None:
    output.table(["file", "document", "status", "chunks", "error"], (
        (r["filename"], r["id"], styled_status(r["status"]), r["chunks"],
         Styled(f"[red]{output.cell(r['error']['code'])}[/]: {output.cell(r['error']['message'])}")
         if r["error"] else None)
        for r in results), title="Upload")
    counts: dict[str, int] = {}
    for r in results:
        key = "failed" if r["error"] or r["status"] == "FAILED" else r["status"].lower()
        counts[key] = counts.get(key, 0) + 1
    output.note(", ".join(f"{n} {name}" for name, n in sorted(counts.items())))
    if not waited and any(r["status"] in ("PENDING", "PROCESSING") for r in results):
        output.note("[dim]Ingestion goes on in the background; --wait follows it, `kb docs list` shows it.[/]")


def _progress(enabled: bool) -> Progress:
    return Progress(TextColumn("{task.description:<10}"), BarColumn(), TaskProgressColumn(),
                    TextColumn("{task.fields[detail]}"), TimeElapsedColumn(),
                    console=output.err, disable=not enabled, transient=False)


@command(app, "upload")
def upload_(session: Session,
            paths: Annotated[list[str], typer.Argument(help="Files, folders (recursive) and globs.",
                                                       show_default=False)],
            kb: KbOption,
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
    """Upload files, folders and globs (presigned S3 PUTs).

    Exits 1 when any file was refused, could not be sent, or (with --wait) failed ingestion."""
    attributes = json_option(metadata, "--metadata")
    plan = upload.Plan.of(upload.collect(paths, include or [], exclude or []))
    client = session.client()
    client.get(f"/knowledge-bases/{kb}")  # an unknown knowledge base is one error, not one per file
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
        if wait:
            ingested = progress.add_task("ingestion", total=len(plan.items), detail="")
            tally = {"PROCESSED": 0, "FAILED": 0}

            def on_done(item: upload.FileResult) -> None:
                tally["FAILED" if item.failed else "PROCESSED"] += 1
                progress.update(ingested, advance=1, detail=f"{tally['PROCESSED']} processed,"
                                                            f" {tally['FAILED']} failed")

            for item in upload.wait_all(client, kb, plan.items, timeout, concurrency, on_done):
                item.error = {"code": "WAIT_TIMEOUT",
                              "message": f"still {item.status} after {timeout:g} s"}
    results = [item.as_dict() for item in plan.items]
    session.emit(results, lambda r: render_upload(r, wait))
    if any(item.failed for item in plan.items):
        raise typer.Exit(1)


@command(app, "list")
def list_(session: Session, kb: KbOption,
          status: Annotated[Optional[Status], typer.Option(help="Only documents in this status.")] = None):
    """List a knowledge base's documents."""
    data = session.client().get(docs_path(kb), params={"status": status.value if status else None})
    session.emit(data, render_docs)


@command(app, "status")
def status(session: Session, doc_id: DocId, kb: KbOption):
    """Show a document: status, error code, pages, chunks, tokens, step durations."""
    session.emit(session.client().get(f"{docs_path(kb)}/{doc_id}"), render_doc)


@command(app, "delete")
def delete(session: Session, doc_id: DocId, kb: KbOption, yes: YesOption = False):
    """Delete a document, its chunks and its object in the bucket."""
    delete_confirmed(session, yes, f"Delete document {doc_id}?", f"{docs_path(kb)}/{doc_id}")


@command(app, "reindex")
def reindex(session: Session, doc_id: DocId, kb: KbOption):
    """Run a document through the pipeline again (embedding anew)."""
    session.emit(session.client().post(f"{docs_path(kb)}/{doc_id}/reindex"), render_doc)


def sync(session: Session, kb: KbOption):
    """Compare the bucket with a knowledge base.

    Objects without a document are ingested, changed ones again; documents whose object is gone are removed."""
    data = session.client().post(f"/knowledge-bases/{kb}/sync")
    session.emit(data, lambda d: output.fields(
        [(name, d.get(name)) for name in ("added", "changed", "removed", "unchanged", "failed")]))
