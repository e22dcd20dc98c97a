"""kb keys: API keys (list, create, revoke, rotate)."""
from typing import Annotated, Optional

import typer

from kbcli import output
from kbcli.output import Styled
from kbcli.session import Session, YesOption, command, confirm, delete_confirmed, new_group

app = new_group("keys", "API keys: list, create, revoke, rotate.")

KeyId = Annotated[str, typer.Argument(help="The key's id (key_…).", show_default=False)]
STATE_STYLE = {"active": "green", "revoked": "red", "expired": "yellow"}


def _state(key: dict) -> Styled:
    state = key.get("status") or ("revoked" if key.get("revokedAt") else "active")
    return Styled(f"[{STATE_STYLE.get(state, 'white')}]{output.cell(state)}[/]")


def render_new_key(key: dict, title: str) -> None:
    output.fields([("id", key.get("id")), ("name", key.get("name")), ("expires", output.when(key.get("expiresAt"))),
                   ("key", Styled(f"[bold]{output.cell(key.get('key'))}[/]"))], title=title)
    output.note("[yellow]Store the key now: it is not shown again.[/]")


@command(app, "list")
def list_(session: Session,
          all_: Annotated[bool, typer.Option("--all", help="Every key of the organisation (admins).")] = False):
    """List API keys (their prefixes, never the keys)."""
    data = session.client().get("/api-keys", params={"all": "true" if all_ else None})
    session.emit(data, lambda d: output.table(
        ["id", "name", "prefix", *(["user"] if all_ else []), "state", "created", "last used", "expires"],
        ((k.get("id"), k.get("name"), k.get("prefix"), *([k.get("userName")] if all_ else []), _state(k),
          output.when(k.get("createdAt")), output.when(k.get("lastUsedAt")), output.when(k.get("expiresAt")))
         for k in d["items"]), empty="no API keys"))


@command(app, "create")
def create(session: Session,
           name: Annotated[str, typer.Argument(help="What the key is for.", show_default=False)],
           expires_in_days: Annotated[Optional[int], typer.Option(help="Expire after this many days"
                                                                  " (default: never).")] = None):
    """Create an API key for yourself; the key is shown once, now."""
    body = {"name": name, **({"expiresInDays": expires_in_days} if expires_in_days is not None else {})}
    session.emit(session.client().post("/api-keys", body), lambda k: render_new_key(k, "API key created"))


@command(app, "revoke")
def revoke(session: Session, key_id: KeyId, yes: YesOption = False):
    """Revoke an API key: requests with it are refused from now on."""
    delete_confirmed(session, yes, f"Revoke API key {key_id}?", f"/api-keys/{key_id}", done="Revoked")


@command(app, "rotate")
def rotate(session: Session, key_id: KeyId, yes: YesOption = False):
    """Replace an API key with a new one (same name and lifetime); the old one stops working."""
    confirm(session, yes, f"Rotate API key {key_id}? The old key stops working.")
    data = session.client().post(f"/api-keys/{key_id}/rotate")
    session.emit(data, lambda k: render_new_key(k, "API key rotated"))
