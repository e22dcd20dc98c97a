"""kb search: one knowledge base or several."""
from enum import Enum
from typing import Annotated, Optional

import typer

from kbcli import output
from kbcli.session import Session, json_option

PREVIEW_CHARS = 400


class Strategy(str, Enum):
    hybrid = "hybrid"
    semantic = "semantic"
    keyword = "keyword"


def _preview(text: str, full: bool) -> str:
    text = " ".join((text or "").split())
    return text if full or len(text) <= PREVIEW_CHARS else text[:PREVIEW_CHARS].rstrip() + " …"


def render_results(data: dict, full: bool, several: bool) -> None:
    columns = ["#", "score", "source", *(["knowledge base"] if several else []), "passage"]
    rows = []
    for hit in data.get("results") or []:
        source = hit.get("source") or "-"
        if hit.get("page") is not None:
            source += f" p.{hit['page']}"
        rows.append((hit.get("rank"), hit.get("similarity"), source,
                     *([hit.get("knowledgeBaseId")] if several else []), _preview(hit.get("content"), full)))
    output.table(columns, rows, empty="no passages matched")
    meta = data.get("metadata") or {}
    output.note(f"[dim]{data.get('resultCount', len(rows))} results, strategy {output.cell(meta.get('strategy'))},"
                f" {output.cell(meta.get('totalTokensUsed'))} tokens, {output.cell(meta.get('omittedCount'))} omitted,"
                f" {output.cell(meta.get('tookMs'))} ms{', cached embedding' if meta.get('cached') else ''}[/]")


def search(session: Session,
           query: Annotated[str, typer.Argument(help="What to look for.", show_default=False)],
           kb: Annotated[list[str], typer.Option("--kb", help="A knowledge base's id; repeat it to search several.",
                                                 show_default=False)],
           strategy: Annotated[Optional[Strategy], typer.Option(help="Default: the service's (hybrid).")] = None,
           top_k: Annotated[Optional[int], typer.Option(help="How many passages (1-20, default 5).")] = None,
           max_tokens: Annotated[Optional[int], typer.Option(help="Token budget for the passages"
                                                             " (default 4000).")] = None,
           min_score: Annotated[Optional[float], typer.Option(help="Least cosine similarity to the query"
                                                              " (0-1).")] = None,
           filter_: Annotated[Optional[str], typer.Option("--filter", help="A Bedrock-style metadata filter as JSON"
                                                          " (or @file.json), e.g. '{\"equals\": {\"key\": \"team\","
                                                          " \"value\": \"support\"}}'.")] = None,
           debug: Annotated[bool, typer.Option("--debug", help="Ask for each passage's separate scores.")] = False,
           full: Annotated[bool, typer.Option("--full", help="Show whole passages in the table.")] = False):
    """Search knowledge bases and print the ranked passages."""
    body = {"query": query, "strategy": strategy.value if strategy else None, "topK": top_k,
            "maxTokens": max_tokens, "minScore": min_score, "filter": json_option(filter_, "--filter"),
            "debug": debug or None}
    body = {k: v for k, v in body.items() if v is not None}
    ids = list(dict.fromkeys(kb))
    client = session.client()
    if len(ids) == 1:
        data = client.post(f"/knowledge-bases/{ids[0]}/search", body)
    else:
        data = client.post("/search", {**body, "knowledgeBaseIds": ids})
    session.emit(data, lambda d: render_results(d, full, len(ids) > 1))
