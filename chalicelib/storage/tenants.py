"""organizations, users and api_keys."""
from typing import Optional

import psycopg

from chalicelib.ids import new_id


def ensure_organization(conn: psycopg.Connection, name: str) -> str:
    row = conn.execute(
        "INSERT INTO organizations (id, name) VALUES (%s, %s)"
        " ON CONFLICT (name) DO UPDATE SET name = EXCLUDED.name RETURNING id",
        (new_id("org"), name),
    ).fetchone()
    return row["id"]


def ensure_user(conn: psycopg.Connection, org_id: str, name: str) -> str:
    row = conn.execute(
        "INSERT INTO users (id, org_id, name) VALUES (%s, %s, %s)"
        " ON CONFLICT (org_id, name) DO UPDATE SET name = EXCLUDED.name RETURNING id",
        (new_id("user"), org_id, name),
    ).fetchone()
    return row["id"]


def insert_api_key(conn: psycopg.Connection, user_id: str, key_hash: str, key_prefix: str) -> str:
    key_id = new_id("key")
    conn.execute(
        "INSERT INTO api_keys (id, user_id, key_hash, key_prefix) VALUES (%s, %s, %s, %s)",
        (key_id, user_id, key_hash, key_prefix),
    )
    return key_id


def find_principal(conn: psycopg.Connection, key_hash: str) -> Optional[dict]:
    return conn.execute(
        "SELECT u.id AS user_id, u.org_id, k.id AS key_id FROM api_keys k"
        " JOIN users u ON u.id = k.user_id"
        " WHERE k.key_hash = %s AND k.revoked_at IS NULL",
        (key_hash,),
    ).fetchone()
