"""kb search: one knowledge base or several, or a file of searches (--batch)."""
import json
from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.markup import escape

from kbcli import output
from kbcli.client import CliError
from kbcli.session import Session, json_option

PREVIEW_CHARS = 400


class Strategy(str, Enum):
    hybrid = "hybrid"
    semantic = "semantic"
    keyword = "keyword"


def _preview(text: str, full: bool) -> str:
    text = " ".join((text or "").split())
    return text if full or len(text) <= PREVIEW_CHARS else text[:PREVIEW_CHARS].rstrip() + " …"


def passage_where(hit: dict) -> str:
    """A passage's path (an entry has none: its title), its page, and the other documents that hold
    the same text or nearly."""
    where = hit.get("path") or hit.get("source") or "-"
    if hit.get("page") is not None:
        where += f" p.{hit['page']}"
    if hit.get("alsoIn"):
        where += " (also in " + ", ".join(a.get("path") or a.get("source") or "-" for a in hit["alsoIn"]) + ")"
    return where


def render_results(data: dict, full: bool, several: bool) -> None:
    """score: what the list is ordered by (hybrid: the fused score, 1.0 first by meaning and by
    words); cosine: the similarity in meaning to the query, which --min-score applies to."""
    columns = ["#", "score", "cosine", "path", "section", *(["knowledge base"] if several else []),
               "passage"]
    rows = []
    for hit in data.get("results") or []:
        rows.append((hit.get("rank"), hit.get("similarity"), (hit.get("scores") or {}).get("vectorScore"),
                     passage_where(hit), hit.get("section"),
                     *([hit.get("knowledgeBaseId")] if several else []),
                     _preview(hit.get("content", hit.get("summary")), full)))
    output.table(columns, rows, empty="no passages matched")
    meta = data.get("metadata") or {}
    output.note(f"[dim]{data.get('resultCount', len(rows))} results, strategy {output.cell(meta.get('strategy'))},"
                f" {output.cell(meta.get('totalTokensUsed'))} tokens, {output.cell(meta.get('omittedCount'))} omitted,"
                f" {output.cell(meta.get('tookMs'))} ms{', cached embedding' if meta.get('cached') else ''}"
                f"{', cached answer' if meta.get('resultsCached') else ''}[/]")


def search(session: Session,
           query: Annotated[Optional[str], typer.Argument(help="What to look for (not with --batch).",
                                                          show_default=False)] = None,
           kb: Annotated[Optional[list[str]], typer.Option(
               "--kb", help="A knowledge base's id or name; repeat it to search several. With --batch, the knowledge"
                            " bases of the searches that name none.", show_default=False)] = None,
           strategy: Annotated[Optional[Strategy], typer.Option(help="Default: the service's (hybrid).")] = None,
           top_k: Annotated[Optional[int], typer.Option(help="How many passages (1-20, default 5).")] = None,
           max_tokens: Annotated[Optional[int], typer.Option(help="Token budget for the passages"
                                                             " (default 4000).")] = None,
           min_score: Annotated[Optional[float], typer.Option(help="Least cosine similarity to the query"
                                                              " (0-1): the cosine column, not the score.")] = None,
           filter_: Annotated[Optional[str], typer.Option("--filter", help="A Bedrock-style metadata filter as JSON"
                                                          " (or @file.json), e.g. '{\"equals\": {\"key\": \"team\","
                                                          " \"value\": \"support\"}}'.")] = None,
           rerank: Annotated[Optional[bool], typer.Option(
               "--rerank/--no-rerank", help="Rerank the passages, or not (default: as the knowledge base says).",
               show_default=False)] = None,
           debug: Annotated[bool, typer.Option("--debug", help="Ask for each passage's separate scores.")] = False,
           full: Annotated[bool, typer.Option("--full", help="Show whole passages in the table.")] = False,
           batch: Annotated[Optional[Path], typer.Option(
               "--batch", help="A file of searches, answered in one request (at most 20): a JSON list, or JSON"
                               " Lines, of objects as POST /search takes them ({\"query\", \"knowledgeBaseIds\","
                               " \"topK\", ...}); the options above fill in what a search leaves out.",
               show_default=False)] = None):
    """Search knowledge bases and print the ranked passages."""
    body = {"query": query, "strategy": strategy.value if strategy else None, "topK": top_k,
            "maxTokens": max_tokens, "minScore": min_score, "filter": json_option(filter_, "--filter"),
            "rerank": rerank, "debug": debug or None}
    body = {k: v for k, v in body.items() if v is not None}
    ids = list(dict.fromkeys(kb or []))
    client = session.client()
    if batch is not None:
        if query is not None:
            raise CliError("INVALID_OPTION", "give either a QUERY or --batch FILE, not both", exit_code=2)
        defaults = {**body, **({"knowledgeBaseIds": ids} if ids else {})}
        data = client.post("/search/batch", {"queries": [{**defaults, **q} for q in _batch_file(batch)]})
        session.emit(data, lambda d: render_batch(d, full))
        if data["metadata"]["failed"]:
            raise typer.Exit(1)
        return
    if query is None or not ids:
        raise CliError("INVALID_OPTION", "give a QUERY and at least one --kb (or --batch FILE)", exit_code=2)
    if len(ids) == 1:
        data = client.post(f"/knowledge-bases/{ids[0]}/search", body)
    else:
        data = client.post("/search", {**body, "knowledgeBaseIds": ids})
    session.emit(data, lambda d: render_results(d, full, len(ids) > 1))


def _batch_file(path: Path) -> list[dict]:
    """A JSON list of searches, or one search per line (JSON Lines)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise CliError("INVALID_OPTION", f"--batch: cannot read {path}: {error.strerror}", exit_code=2) from None
    try:
        parsed = json.loads(text)
    except ValueError:
        try:
            parsed = [json.loads(line) for line in text.splitlines() if line.strip()]
        except ValueError as error:
            raise CliError("INVALID_OPTION", f"--batch: {path} is neither JSON nor JSON Lines ({error})",
                           exit_code=2) from None
    if isinstance(parsed, dict):  # one search alone, or {"queries": [...]} as the API takes it
        parsed = parsed.get("queries", [parsed])
    if not isinstance(parsed, list) or not parsed or not all(isinstance(q, dict) for q in parsed):
        raise CliError("INVALID_OPTION", f"--batch: {path} must hold search objects", exit_code=2)
    return parsed


def render_batch(data: dict, full: bool) -> None:
    for item in data["results"]:
        if item["success"]:
            answer = item["data"]
            output.note(f"[bold]#{item['index'] + 1}[/] {escape(answer['query'])}")
            render_results(answer, full, several=True)
        else:
            error = item["error"]
            output.note(f"[bold]#{item['index'] + 1}[/] [red]{escape(error['code'])}[/]"
                        f" ({item['status']}): {escape(error['message'])}")
    meta = data["metadata"]
    output.note(f"[dim]{meta['succeeded']} of {meta['queryCount']} searches answered[/]")
