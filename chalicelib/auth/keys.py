import hashlib
import secrets
from dataclasses import dataclass
from typing import Optional

from chalicelib.errors import Transient
from chalicelib.storage import connection, tenants

KEY_PREFIX = "kbk_"


@dataclass(frozen=True)
class Principal:
    """Who is calling: a user in an organisation."""
    user_id: str
    org_id: str


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def issue_key(org_name: str, user_name: str) -> tuple[Principal, str]:
    """Create the organisation and user if needed and return a new key for them.
    The key is returned once; only its hash is stored."""
    key = KEY_PREFIX + secrets.token_urlsafe(32)
    with connection() as conn, conn.transaction():
        org_id = tenants.ensure_organization(conn, org_name)
        user_id = tenants.ensure_user(conn, org_id, user_name)
        tenants.insert_api_key(conn, user_id, hash_key(key), key[: len(KEY_PREFIX) + 6])
    return Principal(user_id=user_id, org_id=org_id), key


def authenticate(key) -> Optional[Principal]:
    if not isinstance(key, str) or not key.startswith(KEY_PREFIX):
        return None
    try:
        row = _find_principal(key)
    except Transient:
        # The first statement of every request: a warm worker's connection that a
        # database restart broke fails here, and one fresh connection serves the rest.
        row = _find_principal(key)
    return Principal(user_id=row["user_id"], org_id=row["org_id"]) if row else None


def _find_principal(key: str) -> Optional[dict]:
    with connection() as conn:
        return tenants.find_principal(conn, hash_key(key))


def bearer_token(authorization: Optional[str]) -> Optional[str]:
    if not authorization:
        return None
    scheme, _, token = authorization.strip().partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None
