"""API keys: issuing, listing, revoking and rotating them, and turning a presented key
into the caller it names. Only a SHA-256 of a key is stored; the key is shown once.

A worker remembers the caller a key named for limits.KEY_REMEMBERED_SECONDS, under the
keys' generation in Redis that it read before asking the database: every revocation,
rotation and change of a user's role or groups moves that generation once committed, and each
request reads it in its one Redis round trip (throttle.check), so a revoked key is
refused from its next request in every worker. With Redis unreachable nothing is
remembered (every request asks the database); a key that expires, or a change made
while Redis was away, is seen within the remembered time."""
import hashlib
import logging
import secrets
import time
from dataclasses import dataclass
from datetime import timedelta
from typing import Optional

import redis

from chalicelib import limits
from chalicelib.auth.access import forget_views, require_admin
from chalicelib.auth.principal import Principal
from chalicelib.errors import Forbidden, NotFound, Transient
from chalicelib.kv import redis_client
from chalicelib.storage import EVERY_ORGANISATION, acting_for, audit, connection, tenants

logger = logging.getLogger(__name__)
KEY_PREFIX = "kbk_"
# Redis: a new random value at each change of a key or a user's role (random, not a
# counter: a Redis that lost it cannot come back to a value a worker remembered).
GENERATION_KEY = "kb:keys:generation"
_REMEMBERED_MAX = 1000  # callers a worker remembers; beyond, it starts over
# hash of the presented key -> (its caller, the generation read before the lookup, until when)
_remembered: dict[str, tuple[Principal, str, float]] = {}


@dataclass(frozen=True)
class NewKey:
    row: dict
    key: str


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def _new_key() -> tuple[str, str, str]:
    """(the key, its hash, the prefix shown in listings)."""
    key = KEY_PREFIX + secrets.token_urlsafe(32)
    return key, hash_key(key), key[: len(KEY_PREFIX) + 6]


def issue_key(org_name: str, user_name: str, role: Optional[str] = None, *,
              rate_per_second: Optional[int] = None, groups: Optional[list[str]] = None) -> tuple[Principal, str]:
    """`make key`: create the organisation and user if needed (the first user of an
    organisation is its admin; later ones are editors unless a role is given; a role or
    groups given for an existing user become theirs) and return a new key for them."""
    key, digest, prefix = _new_key()
    with acting_for(EVERY_ORGANISATION), connection() as conn, conn.transaction():
        org_id = tenants.ensure_organization(conn, org_name)
        user = tenants.ensure_user(conn, org_id, user_name, role, groups)
        row = tenants.insert_api_key(conn, user["id"], digest, prefix, name="make key", expires_in=None,
                                     rate_per_second=rate_per_second)
    if role is not None or groups is not None:
        # An existing user's may have changed: their other keys, and what they may read
        # (kb_access_allows reads their groups), are checked again from the next request.
        keys_changed()
    return Principal(user_id=user["id"], org_id=org_id, role=user["role"], key_id=row["id"],
                     rate_per_second=rate_per_second), key


def remembered(key) -> Optional[Principal]:
    """The caller this worker last found for the key, if it is still within its time: what
    the request's Redis round trip takes a token for (authenticate then checks the generation)."""
    found = _remembered.get(hash_key(key)) if isinstance(key, str) else None
    return found[0] if found is not None and found[2] > time.monotonic() else None


def authenticate(key, generation: Optional[str] = None) -> Optional[Principal]:
    """The caller a key names; None when the key is unknown, revoked or expired. With the
    keys' generation just read from Redis (throttle.check), a caller remembered under that
    generation is answered without the database, and the one found is remembered."""
    if not isinstance(key, str) or not key.startswith(KEY_PREFIX):
        return None
    digest = hash_key(key)
    found = _remembered.get(digest)
    if found is not None and generation is not None and found[1] == generation and found[2] > time.monotonic():
        return found[0]
    try:
        row = _find_principal(digest)
    except Transient:
        # The first statement of a request that asks the database: a warm worker's connection
        # that a database restart broke fails here, and one fresh connection serves the rest.
        row = _find_principal(digest)
    if row is None:
        _remembered.pop(digest, None)
        return None
    principal = Principal(user_id=row["user_id"], org_id=row["org_id"], role=row["role"], key_id=row["key_id"],
                          rate_per_second=row["rate_per_second"])
    if generation is not None:
        if len(_remembered) >= _REMEMBERED_MAX:
            _remembered.clear()
        _remembered[digest] = (principal, generation, time.monotonic() + limits.KEY_REMEMBERED_SECONDS)
    return principal


def _find_principal(digest: str) -> Optional[dict]:
    # kb_principal is a security definer: it reads the same whichever organisation the session
    # acts for, so the session keeps the setting of its last request (no set_config twice).
    with connection(keep_caller=True) as conn:
        return tenants.find_principal(conn, digest)


def keys_changed() -> None:
    """After a key was revoked or a user's role or groups changed (committed): every worker's
    remembered callers, and the views of knowledge bases remembered for them
    (access.searchable), are checked against the database again from their next request."""
    _remembered.clear()
    forget_views()
    client = redis_client(limits.RATE_LIMIT_REDIS_TIMEOUT_SECONDS)
    if client is None:
        return
    try:
        client.set(GENERATION_KEY, secrets.token_hex(8))
    except redis.RedisError as exc:
        logger.warning("could not tell the workers a key changed (they notice within %s s): %s",
                       limits.KEY_REMEMBERED_SECONDS, exc)


def list_keys(principal: Principal, *, whole_organization: bool) -> list[dict]:
    with connection() as conn:
        if whole_organization:
            require_admin(principal, "list the organisation's keys")
            return tenants.org_keys(conn, principal.org_id)
        return tenants.user_keys(conn, principal.user_id)


def create_key(principal: Principal, *, name: str, expires_in_days: Optional[int]) -> NewKey:
    """A new key for the caller themself, with the caller's role."""
    key, digest, prefix = _new_key()
    with connection() as conn, conn.transaction():
        row = tenants.insert_api_key(
            conn, principal.user_id, digest, prefix, name=name,
            expires_in=None if expires_in_days is None else timedelta(days=expires_in_days))
        audit.write(conn, principal, "create_api_key", "api_key", row["id"],
                    after={"name": name, "prefix": prefix, "expiresAt": row["expires_at"]})
    return NewKey(row=row, key=key)


def _key_to_manage(conn, principal: Principal, key_id: str) -> dict:
    """A key of the caller, or of the caller's organisation for an admin; NotFound otherwise."""
    row = tenants.get_key(conn, key_id, principal.org_id, for_update=True)
    if row is None or (row["user_id"] != principal.user_id and not principal.is_admin):
        raise NotFound.thing("API key", key_id)
    return row


def revoke_key(principal: Principal, key_id: str) -> dict:
    """Revoked keys answer 401 from the next request on; revoking twice changes nothing."""
    with connection() as conn, conn.transaction():
        row = _key_to_manage(conn, principal, key_id)
        if row["revoked_at"] is None:
            row = tenants.revoke_key(conn, key_id)
            audit.write(conn, principal, "revoke_api_key", "api_key", key_id,
                        before={"name": row["name"], "prefix": row["key_prefix"], "userId": row["user_id"]})
    keys_changed()
    return row


def rotate_key(principal: Principal, key_id: str) -> NewKey:
    """A new key with the old one's owner, name, rate and lifetime; the old one is revoked."""
    key, digest, prefix = _new_key()
    with connection() as conn, conn.transaction():
        old = _key_to_manage(conn, principal, key_id)
        if old["user_id"] != principal.user_id:
            # The new key would be a working key for that user in the admin's hands, and with it
            # the user's private knowledge bases and individual entries: an admin revokes.
            raise Forbidden(f"API key {key_id} is another user's: an admin may revoke it, only its owner rotates it")
        if old["revoked_at"] is not None:
            raise NotFound(f"API key {key_id} was revoked; create a new key instead")
        lifetime = None
        if old["expires_at"] is not None:
            lifetime = old["expires_at"] - old["created_at"]
        row = tenants.insert_api_key(conn, old["user_id"], digest, prefix, name=old["name"],
                                     expires_in=lifetime, rate_per_second=old["rate_per_second"])
        tenants.revoke_key(conn, key_id)
        audit.write(conn, principal, "rotate_api_key", "api_key", key_id,
                    before={"id": key_id, "prefix": old["key_prefix"]},
                    after={"id": row["id"], "prefix": prefix, "expiresAt": row["expires_at"]})
    keys_changed()
    return NewKey(row=row, key=key)


def bearer_token(authorization: Optional[str]) -> Optional[str]:
    if not authorization:
        return None
    scheme, _, token = authorization.strip().partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None
