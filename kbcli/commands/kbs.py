"""kb kbs: knowledge bases."""
from enum import Enum
from typing import Annotated, Optional

import typer

from kbcli import output
from kbcli.client import CliError
from kbcli.session import Session, YesOption, command, delete_confirmed, new_group

app = new_group("kbs", "Knowledge bases: create, list, show, update, delete.")


class Visibility(str, Enum):
    private = "private"
    org = "org"
    public = "public"


class ChunkingStrategy(str, Enum):
    fixed = "fixed"
    semantic = "semantic"
    hierarchical = "hierarchical"


ParentTokens = Annotated[Optional[int], typer.Option(
    help="hierarchical: the most tokens of a passage answered around the chunk that matched.")]
ChildTokens = Annotated[Optional[int], typer.Option(
    help="hierarchical: tokens per chunk indexed (at most what the embedding model reads: 214 for the local one).")]


KbId = Annotated[str, typer.Argument(help="The knowledge base's id (kb_…) or name.", show_default=False)]


def kb_path(kb_id: str) -> str:
    return f"/knowledge-bases/{kb_id}"


def chunking_sizes(chunking: dict) -> str:
    if "parentTokens" in chunking:
        return (f"passages of up to {chunking['parentTokens']} tokens around chunks of {chunking['childTokens']},"
                f" overlap {chunking.get('chunkOverlap')}")
    return f"{chunking.get('chunkTokens')} tokens, overlap {chunking.get('chunkOverlap')}"


def render_kb(kb: dict) -> None:
    stats = kb.get("stats") or {}
    embedding, chunking = kb.get("embedding") or {}, kb.get("chunking") or {}
    by_status = stats.get("documentsByStatus") or {}
    output.fields([
        ("id", kb["id"]), ("name", kb["name"]), ("description", kb.get("description")),
        ("visibility", kb.get("visibility")),
        ("embedding", f"{embedding.get('provider')} / {embedding.get('model')} ({embedding.get('dimension')} dims)"),
        ("chunking", f"{chunking.get('strategy', 'fixed')}, {chunking_sizes(chunking)}"),
        ("rerank", "by default" if (kb.get("search") or {}).get("rerank") else "when a search asks"),
        ("documents", f"{stats.get('documentCount', 0)} ("
                      + ", ".join(f"{k.lower()} {v}" for k, v in by_status.items()) + ")"),
        ("chunks", stats.get("chunkCount")), ("tokens", stats.get("totalTokens")),
        ("last ingested", output.when(stats.get("lastIngestedAt"))),
        ("created", output.when(kb.get("createdAt"))), ("updated", output.when(kb.get("updatedAt"))),
    ])


def render_created(kb: dict) -> None:
    output.note(f"[green]Created[/] {output.cell(kb['id'])}")
    render_kb(kb)


def render_kbs(data: dict) -> None:
    output.table(["id", "name", "visibility", "documents", "chunks", "updated"], (
        (kb["id"], kb["name"], kb.get("visibility"), (kb.get("stats") or {}).get("documentCount"),
         (kb.get("stats") or {}).get("chunkCount"), output.when(kb.get("updatedAt")))
        for kb in data["items"]), empty="no knowledge bases")
    if data.get("nextToken"):
        output.note(f"more: --next-token {data['nextToken']}")


@command(app, "create")
def create(session: Session,
           name: Annotated[str, typer.Argument(help="Its name.", show_default=False)],
           description: Annotated[Optional[str], typer.Option(help="What it holds.")] = None,
           chunk_tokens: Annotated[Optional[int], typer.Option(help="Tokens per chunk of the fixed and semantic"
                                                               " strategies.")] = None,
           chunk_overlap: Annotated[Optional[int], typer.Option(help="Tokens shared by neighbouring chunks.")] = None,
           chunking_strategy: Annotated[Optional[ChunkingStrategy], typer.Option(
               help="fixed: as many sentences as fit; semantic: a chunk also ends where the topic changes;"
                    " hierarchical: small chunks indexed, the passage around them answered (the default"
                    " with the local model and Bedrock).")] = None,
           parent_tokens: ParentTokens = None, child_tokens: ChildTokens = None,
           visibility: Annotated[Visibility, typer.Option(help="Who may see it.")] = Visibility.private,
           embedding_provider: Annotated[Optional[str], typer.Option(help="local, openai or bedrock.")] = None,
           embedding_model: Annotated[Optional[str], typer.Option(help="The provider's model.")] = None,
           rerank: Annotated[Optional[bool], typer.Option(
               "--rerank/--no-rerank", help="Rerank every search that does not say (where the deployment"
                                            " has a reranker).", show_default=False)] = None):
    """Create a knowledge base."""
    body: dict = {"name": name, "visibility": visibility.value}
    if description is not None:
        body["description"] = description
    chunking = {k: v for k, v in (("chunkTokens", chunk_tokens), ("chunkOverlap", chunk_overlap),
                                  ("parentTokens", parent_tokens), ("childTokens", child_tokens),
                                  ("strategy", chunking_strategy and chunking_strategy.value)) if v is not None}
    if chunking:
        body["chunking"] = chunking
    embedding = {k: v for k, v in (("provider", embedding_provider), ("model", embedding_model)) if v}
    if embedding:
        body["embedding"] = embedding
    if rerank is not None:
        body["search"] = {"rerank": rerank}
    session.emit(session.client().post("/knowledge-bases", body), render_created)


@command(app, "list")
def list_(session: Session,
          limit: Annotated[Optional[int], typer.Option(help="One page of this many (default: every page).")] = None,
          next_token: Annotated[Optional[str], typer.Option(help="The page after this token.")] = None):
    """List the knowledge bases you can see."""
    client = session.client()
    if limit is not None or next_token is not None:
        data = client.get("/knowledge-bases", params={"limit": limit, "nextToken": next_token})
    else:
        items, token = [], None
        while True:
            page = client.get("/knowledge-bases", params={"limit": 100, "nextToken": token})
            items.extend(page["items"])
            token = page.get("nextToken")
            if not token:
                break
        data = {"items": items, "nextToken": None}
    session.emit(data, render_kbs)


@command(app, "show")
def show(session: Session, kb_id: KbId):
    """Show a knowledge base with its statistics."""
    session.emit(session.client().get(kb_path(kb_id)), render_kb)


@command(app, "update")
def update(session: Session, kb_id: KbId,
           name: Annotated[Optional[str], typer.Option(help="A new name.")] = None,
           description: Annotated[Optional[str], typer.Option(help="A new description.")] = None,
           visibility: Annotated[Optional[Visibility], typer.Option(help="Who may see it.")] = None,
           rerank: Annotated[Optional[bool], typer.Option(
               "--rerank/--no-rerank", help="Rerank every search that does not say, or not.",
               show_default=False)] = None):
    """Change a knowledge base's name, description, visibility or default reranking.

    The embedding model and chunking are fixed at creation."""
    body = {k: v for k, v in (("name", name), ("description", description),
                              ("visibility", visibility.value if visibility else None)) if v is not None}
    if rerank is not None:
        body["search"] = {"rerank": rerank}
    if not body:
        raise CliError("NOTHING_TO_CHANGE", "give --name, --description, --visibility or --rerank/--no-rerank",
                       exit_code=2)
    session.emit(session.client().patch(kb_path(kb_id), body), render_kb)


@command(app, "delete")
def delete(session: Session, kb_id: KbId, yes: YesOption = False):
    """Delete a knowledge base with its documents."""
    delete_confirmed(session, yes, f"Delete knowledge base {kb_id} and all its documents?", kb_path(kb_id))


def render_rebuild(rebuild: dict) -> None:
    docs, chunking = rebuild["documents"], rebuild["chunking"]
    output.fields([("rebuild", rebuild["id"]), ("status", rebuild["status"]),
                   ("chunking", f"{chunking.get('strategy', 'fixed')}, {chunking_sizes(chunking)}"),
                   ("documents", f"{docs['processed']} of {docs['total']} processed, {docs['failed']} failed"
                                 f" ({docs['started']} started)"),
                   ("error", (rebuild.get("error") or {}).get("message"))])


@command(app, "rebuild")
def rebuild(session: Session, kb_id: KbId,
            chunk_tokens: Annotated[Optional[int], typer.Option(help="New tokens per chunk.")] = None,
            chunk_overlap: Annotated[Optional[int], typer.Option(help="New overlap.")] = None,
            chunking_strategy: Annotated[Optional[ChunkingStrategy], typer.Option(
                help="A new strategy (sizes left out: its defaults).")] = None,
            parent_tokens: ParentTokens = None, child_tokens: ChildTokens = None,
            wait: Annotated[bool, typer.Option("--wait", help="Wait until every document is rebuilt.")] = False,
            timeout: Annotated[float, typer.Option(help="Seconds --wait waits at most.")] = 600):
    """Chunk and embed every document again (optionally with new chunk sizes); search answers meanwhile."""
    import time

    chunking = {k: v for k, v in (("chunkTokens", chunk_tokens), ("chunkOverlap", chunk_overlap),
                                  ("parentTokens", parent_tokens), ("childTokens", child_tokens),
                                  ("strategy", chunking_strategy and chunking_strategy.value)) if v is not None}
    client = session.client()
    data = client.post(f"{kb_path(kb_id)}/rebuild", {"chunking": chunking} if chunking else {})
    deadline = time.monotonic() + timeout
    while wait and data["status"] == "RUNNING" and time.monotonic() < deadline:
        time.sleep(1)
        data = client.get(f"{kb_path(kb_id)}/rebuild")
    session.emit(data, render_rebuild)
    if wait and data["status"] != "SUCCEEDED":
        raise typer.Exit(1)
