"""organizations, users and api_keys."""
from datetime import timedelta
from typing import Optional

import psycopg

from chalicelib.ids import new_id

KEY_COLUMNS = """k.id, k.user_id, u.name AS user_name, k.name, k.key_prefix, k.created_at, k.last_used_at,
    k.expires_at, k.revoked_at, k.rate_per_second"""


def ensure_organization(conn: psycopg.Connection, name: str) -> str:
    row = conn.execute(
        "INSERT INTO organizations (id, name) VALUES (%s, %s)"
        " ON CONFLICT (name) DO UPDATE SET name = EXCLUDED.name RETURNING id",
        (new_id("org"), name),
    ).fetchone()
    return row["id"]


def ensure_user(conn: psycopg.Connection, org_id: str, name: str, role: Optional[str],
                groups: Optional[list[str]] = None) -> dict:
    """{id, role}. A new organisation's first user is its admin, later ones editors,
    unless a role is given; a role or groups (migration 0018) given for an existing user
    replace theirs."""
    return conn.execute(
        "INSERT INTO users (id, org_id, name, role, groups) VALUES (%(id)s, %(org_id)s, %(name)s,"
        " coalesce(%(role)s, CASE WHEN EXISTS (SELECT 1 FROM users WHERE org_id = %(org_id)s)"
        "                         THEN 'editor' ELSE 'admin' END), coalesce(%(groups)s::text[], '{}'))"
        " ON CONFLICT (org_id, name) DO UPDATE SET role = coalesce(%(role)s, users.role),"
        "                                          groups = coalesce(%(groups)s::text[], users.groups)"
        " RETURNING id, role",
        {"id": new_id("user"), "org_id": org_id, "name": name, "role": role, "groups": groups},
    ).fetchone()


def user_role(conn: psycopg.Connection, user_id: str) -> Optional[str]:
    row = conn.execute("SELECT role FROM users WHERE id = %s", (user_id,)).fetchone()
    return row["role"] if row else None


def insert_api_key(conn: psycopg.Connection, user_id: str, key_hash: str, key_prefix: str, *, name: str,
                   expires_in: Optional[timedelta], rate_per_second: Optional[int] = None) -> dict:
    key_id = new_id("key")
    conn.execute(
        "INSERT INTO api_keys (id, user_id, key_hash, key_prefix, name, expires_at, rate_per_second)"
        " VALUES (%s, %s, %s, %s, %s, now() + %s::interval, %s)",
        (key_id, user_id, key_hash, key_prefix, name, expires_in, rate_per_second),
    )
    return _key(conn, key_id)


def _key(conn: psycopg.Connection, key_id: str) -> dict:
    return conn.execute(f"SELECT {KEY_COLUMNS} FROM api_keys k JOIN users u ON u.id = k.user_id"
                        " WHERE k.id = %s", (key_id,)).fetchone()


def find_principal(conn: psycopg.Connection, key_hash: str) -> Optional[dict]:
    """The user a live key names (not revoked, not expired), whatever organisation the
    connection acts for (migration 0009); it also notes the key's use, once a minute."""
    return conn.execute("SELECT user_id, org_id, role, key_id, rate_per_second FROM kb_principal(%s)",
                        (key_hash,)).fetchone()


def user_keys(conn: psycopg.Connection, user_id: str) -> list[dict]:
    return conn.execute(f"SELECT {KEY_COLUMNS} FROM api_keys k JOIN users u ON u.id = k.user_id"
                        " WHERE k.user_id = %s ORDER BY k.created_at, k.id", (user_id,)).fetchall()


def org_keys(conn: psycopg.Connection, org_id: str) -> list[dict]:
    return conn.execute(f"SELECT {KEY_COLUMNS} FROM api_keys k JOIN users u ON u.id = k.user_id"
                        " WHERE u.org_id = %s ORDER BY k.created_at, k.id", (org_id,)).fetchall()


def get_key(conn: psycopg.Connection, key_id: str, org_id: str, *, for_update: bool = False) -> Optional[dict]:
    return conn.execute(
        f"SELECT {KEY_COLUMNS} FROM api_keys k JOIN users u ON u.id = k.user_id"
        " WHERE k.id = %s AND u.org_id = %s" + (" FOR UPDATE OF k" if for_update else ""),
        (key_id, org_id)).fetchone()


def revoke_key(conn: psycopg.Connection, key_id: str) -> dict:
    conn.execute("UPDATE api_keys SET revoked_at = now() WHERE id = %s AND revoked_at IS NULL", (key_id,))
    return _key(conn, key_id)
