"""What every command shares: the --json/--api-url/--api-key options, the client,
and one place that turns failures into a message and an exit code (never a traceback)."""
import functools
import inspect
import json
import os
import sys
import traceback
from dataclasses import dataclass, field
from typing import Annotated, Any, Callable, Optional

import typer

from kbcli import config, names, output
from kbcli.client import CliError, Client

JsonOption = Annotated[bool, typer.Option("--json", help="Print only JSON (the API's data), for scripts.")]
ApiUrlOption = Annotated[Optional[str], typer.Option("--api-url", help="The API's base URL (default: KB_API_URL"
                                                     " or the nearest .kb/local.env).", show_default=False)]
ApiKeyOption = Annotated[Optional[str], typer.Option("--api-key", help="The API key (default: KB_API_KEY or the"
                                                     " nearest .kb/local.env).", show_default=False)]
YesOption = Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")]


@dataclass
class Globals:
    """The root command's options; a command's own options win over them."""
    json: bool = False
    api_url: Optional[str] = None
    api_key: Optional[str] = None


@dataclass
class Session:
    json: bool
    api_url: Optional[str]
    api_key: Optional[str]
    _client: Optional[Client] = field(default=None, repr=False)

    def client(self, *, need_key: bool = True) -> Client:
        if self._client is None:
            self._client = Client(config.resolve(self.api_url, self.api_key), need_key=need_key)
        return self._client

    def emit(self, data: Any, render: Callable[[Any], None]) -> None:
        output.emit(self.json, data, render)

    def close(self) -> None:
        if self._client is not None:
            self._client.close()


def _globals(ctx: typer.Context) -> Globals:
    root = ctx.find_root()
    return root.obj if isinstance(root.obj, Globals) else Globals()


def _common_parameters() -> list[inspect.Parameter]:
    kw = inspect.Parameter.KEYWORD_ONLY
    return [inspect.Parameter("ctx", kw, annotation=typer.Context),
            inspect.Parameter("json_output", kw, annotation=JsonOption, default=False),
            inspect.Parameter("api_url", kw, annotation=ApiUrlOption, default=None),
            inspect.Parameter("api_key", kw, annotation=ApiKeyOption, default=None)]


def _help_text(doc: Optional[str]) -> Optional[str]:
    """A docstring's paragraphs each on one line: typer keeps the line breaks of the paragraphs after the
    first, so a docstring wrapped for the source would print ragged in a narrower terminal."""
    if not doc:
        return doc
    return "\n\n".join(" ".join(paragraph.split()) for paragraph in inspect.cleandoc(doc).split("\n\n"))


def command(app: typer.Typer, name: Optional[str] = None, **settings) -> Callable:
    """Registers `fn(session, ...)` as a command of `app`: typer sees fn's parameters
    after the session, plus the click context and --json, --api-url and --api-key."""
    def decorate(fn: Callable) -> Callable:
        signature = inspect.signature(fn)
        own = list(signature.parameters.values())[1:]

        @functools.wraps(fn)
        def run(*args, ctx: typer.Context, json_output: bool = False, api_url: Optional[str] = None,
                api_key: Optional[str] = None, **kwargs):
            shared = _globals(ctx)
            session = Session(json=json_output or shared.json, api_url=api_url or shared.api_url,
                              api_key=api_key or shared.api_key)
            try:
                return fn(session, *args, **names.resolve_arguments(session.client, kwargs))
            except CliError as error:
                output.show_error(error, session.json)
                raise typer.Exit(error.exit_code) from None
            except (typer.Exit, typer.Abort, typer.TyperException):
                raise
            except KeyboardInterrupt:
                output.err.print("interrupted")
                raise typer.Exit(130) from None
            except Exception as error:  # a defect of the CLI itself: say what, not where
                if os.environ.get("KB_DEBUG"):
                    traceback.print_exc()
                output.show_error(CliError("INTERNAL_ERROR", f"{type(error).__name__}: {error}"
                                           " (set KB_DEBUG=1 for the traceback)"), session.json)
                raise typer.Exit(1) from None
            finally:
                session.close()

        run.__doc__ = _help_text(fn.__doc__)
        run.__signature__ = signature.replace(parameters=own + _common_parameters())
        run.__annotations__ = {p.name: p.annotation for p in own + _common_parameters()}
        return app.command(name, **settings)(run)
    return decorate


def confirm(session: Session, yes: bool, question: str) -> None:
    if yes:
        return
    if not sys.stdin.isatty():
        raise CliError("CONFIRMATION_REQUIRED", f"{question} Pass --yes to confirm without a prompt.",
                       exit_code=2)
    if not typer.confirm(question, default=False, err=True):
        raise typer.Exit(1)


def delete_confirmed(session: Session, yes: bool, question: str, path: str, *, done: str = "Deleted") -> None:
    """Every delete and revoke: ask (or take --yes), DELETE the path, say what went."""
    confirm(session, yes, question)
    data = session.client().delete(path)
    session.emit(data, lambda d: output.note(f"{done} {output.cell(d['id'])}"))


def json_option(value: Optional[str], name: str, *, kind: type = dict) -> Any:
    """A JSON option (--filter, --metadata), or '@file' holding the JSON."""
    if value is None:
        return None
    text = value
    if value.startswith("@"):
        try:
            with open(value[1:], encoding="utf-8") as handle:
                text = handle.read()
        except OSError as error:
            raise CliError("INVALID_OPTION", f"{name}: cannot read {value[1:]}: {error.strerror}",
                           exit_code=2) from None
    try:
        parsed = json.loads(text)
    except ValueError as error:
        raise CliError("INVALID_OPTION", f"{name}: not JSON ({error})", exit_code=2) from None
    if not isinstance(parsed, kind):
        raise CliError("INVALID_OPTION", f"{name}: must be a JSON {kind.__name__.replace('dict', 'object')}",
                       exit_code=2)
    return parsed


def new_group(name: str, help: str) -> typer.Typer:
    return typer.Typer(name=name, help=help, no_args_is_help=True, pretty_exceptions_enable=False)
