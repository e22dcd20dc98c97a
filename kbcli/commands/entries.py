"""kb entries: text entries (an agent's earlier answer, a note), searchable at once."""
import sys
from typing import Annotated, Optional

import typer

from kbcli import output
from kbcli.client import CliError
from kbcli.session import Session, command, json_option, new_group

app = new_group("entries", "Text entries: add a searchable piece of text to a knowledge base.")


@command(app, "add")
def add(session: Session,
        kb: Annotated[str, typer.Option("--kb", help="The knowledge base's id (kb_…) or name.", show_default=False)],
        title: Annotated[str, typer.Option(help="Its title (weighs more in keyword search).", show_default=False)],
        content: Annotated[Optional[str], typer.Option(help="The text (or --file, or standard input).")] = None,
        file: Annotated[Optional[str], typer.Option("--file", help="Read the text from this file"
                                                    " ('-': stdin).")] = None,
        metadata: Annotated[Optional[str], typer.Option(help="JSON object of metadata attributes"
                                                        " (or @file.json).")] = None,
        level: Annotated[Optional[str], typer.Option(help="Who may read it: individual (the default), organisation"
                                                     " (organization) or public.")] = None):
    """Add a text entry; it is searchable when the command returns."""
    if content is not None and file is not None:
        raise CliError("INVALID_OPTION", "give --content or --file, not both", exit_code=2)
    if content is None:
        if file not in (None, "-"):
            try:
                with open(file, encoding="utf-8") as handle:
                    content = handle.read()
            except (OSError, UnicodeDecodeError) as error:
                raise CliError("INVALID_OPTION", f"--file: cannot read {file}: {error}", exit_code=2) from None
        elif file == "-" or not sys.stdin.isatty():
            content = sys.stdin.read()
        else:
            raise CliError("INVALID_OPTION", "give the text with --content, --file or on standard input",
                           exit_code=2)
    body = {"title": title, "content": content}
    attributes = json_option(metadata, "--metadata")
    if attributes:
        body["metadata"] = attributes
    if level is not None:
        body["level"] = level
    entry = session.client().post(f"/knowledge-bases/{kb}/entries", body)
    session.emit(entry, lambda e: output.fields(
        [("id", e.get("id")), ("title", e.get("title")), ("chunks", e.get("chunks")), ("tokens", e.get("tokens")),
         ("level", e.get("level")), ("url", e.get("url"))], title="Entry added"))
