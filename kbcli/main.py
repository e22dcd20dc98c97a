"""The `kb` command: its groups, the top-level commands, and the options every command
also takes before its name (kb --json kbs list)."""
from typing import Annotated, Optional

import typer

from kbcli import __version__, output
from kbcli.commands import agents, apply, docs, entries, keys, kbs, search, sessions, tools
from kbcli.session import ApiKeyOption, ApiUrlOption, Globals, JsonOption, Session, command

app = typer.Typer(name="kb", help="The knowledge-base service from the command line. The API's URL and key come"
                                  " from --api-url/--api-key, KB_API_URL/KB_API_KEY, or the nearest"
                                  " .kb/local.env.",
                  no_args_is_help=True, pretty_exceptions_enable=False)
app.add_typer(kbs.app)
app.add_typer(docs.app)
app.add_typer(agents.app)
app.add_typer(tools.app)
app.add_typer(entries.app)
app.add_typer(keys.app)
app.add_typer(sessions.app)
command(app, "search")(search.search)
command(app, "sync")(docs.sync)
command(app, "sync-folder")(docs.sync_folder)
apply.register(app)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"kb {__version__}")
        raise typer.Exit()


@app.callback()
def root(ctx: typer.Context, json_output: JsonOption = False, api_url: ApiUrlOption = None,
         api_key: ApiKeyOption = None,
         version: Annotated[Optional[bool], typer.Option("--version", callback=_version, is_eager=True,
                                                         help="Print the version and exit.")] = None):
    ctx.obj = Globals(json=json_output, api_url=api_url, api_key=api_key)


@command(app, "health")
def health(session: Session):
    """Whether the API, its database, Redis and bucket answer (no key needed)."""
    client = session.client(need_key=False)
    data = client.get("/health")
    def render(d: dict) -> None:
        output.note(f"{output.cell(client.base_url)}: {output.cell(d.get('status'))}")
        output.table(["check", "ok", "latency ms"], (
            (name, check.get("ok"), f"{check['latencyMs']:.1f}" if check.get("latencyMs") is not None else None)
            for name, check in (d.get("checks") or {}).items()))
    session.emit(data, render)


@command(app, "mcp")
def mcp(session: Session, agent: tools.AgentOption):
    """Serve the agent's tools over MCP on stdin/stdout, for desktop clients (see the README)."""
    from kbcli import mcp_stdio  # the SDK loads only for this command

    mcp_stdio.serve(session.client(), agent)


def main() -> None:
    app(prog_name="kb")


if __name__ == "__main__":
    main()
