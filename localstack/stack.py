"""`make up | down | status | key`: the whole stack on this machine.

    python localstack/stack.py up [--no-demo]   services, migrations, deploy, demo
    python localstack/stack.py down
    python localstack/stack.py status
    python localstack/stack.py key ORG USER [--role admin|editor|viewer] [--rate N] [--groups a,b]
"""
import argparse
import json
import os
import shlex
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "localstack"))
sys.path.insert(0, str(ROOT / "infra"))

import legacy  # noqa: E402
import services  # noqa: E402

from chalicelib.storage.db import functions_login  # noqa: E402

ENV_FILE = services.STATE / "local.env"
# The folders a knowledge base's folder source may read (FOLDER_SOURCE_ROOTS, separated by ':'):
# one of the clone's own, never the state directory (the emulator's objects, the keys).
FOLDER_SOURCE_DIR = ROOT / "folder-sources"
BUCKET = "kb-documents-local"
STACK = "kb-service"
LOCAL_CORS_ORIGINS = "http://localhost:3000,http://127.0.0.1:3000"
LOCAL_DIST = ROOT / "build" / "local"  # the template and code zip for the emulator (no layers)
REGION = "us-east-1"
DEMO_ORG, DEMO_USER, DEMO_KB, DEMO_AGENT = "demo-org", "demo-user", "Demo knowledge base", "Demo agent"
SAMPLE = ROOT / "samples" / "getting-started.md"
SAMPLE_QUERY = "How do I make a file searchable?"
ORDINALS = ("first", "second", "third", "fourth", "fifth")


def read_env_file() -> dict:
    from kbcli.config import read_env_file as read

    return read(ENV_FILE) if ENV_FILE.exists() else {}


def write_env_file(values: dict) -> None:
    """`export NAME=value` lines, quoted for a shell: `source .kb/local.env` hands them to
    `kb`, curl and the SDKs started from that shell (kbcli.config.read_env_file reads them)."""
    ENV_FILE.write_text("# The local stack's settings (`make up` writes them): source .kb/local.env\n"
                        + "".join(f"export {k}={shlex.quote(str(v))}\n" for k, v in values.items()))


def _aws_env(endpoint: str) -> None:
    os.environ.update({"AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": "test",
                       "AWS_SECRET_ACCESS_KEY": "test", "AWS_DEFAULT_REGION": REGION})


def folder_source_roots() -> str:
    """KB_FOLDER_SOURCE_ROOTS, else the clone's folder-sources/ (made here); a root that holds
    the state directory, or lies in it, is refused: every organisation may read a root."""
    listed = os.environ.get("KB_FOLDER_SOURCE_ROOTS")
    roots = [Path(r) for r in listed.split(os.pathsep) if r.strip()] if listed is not None else [FOLDER_SOURCE_DIR]
    state = services.STATE.resolve()
    for root in roots:
        if not root.is_absolute():
            raise SystemExit(f"KB_FOLDER_SOURCE_ROOTS: {root} is not an absolute path")
        real = root.resolve()
        if real == state or state in real.parents or real in state.parents:
            raise SystemExit(f"KB_FOLDER_SOURCE_ROOTS: {root} holds or lies in the stack's state ({state}),"
                             " which no knowledge base may read")
    if listed is None:
        FOLDER_SOURCE_DIR.mkdir(exist_ok=True)
    return os.pathsep.join(str(r) for r in roots)


def _stack_parameters(urls: dict) -> dict:
    """The template's local case: the existing database and Redis, the emulator's bucket
    name, the model built under build/, and pipeline steps bounded by this machine's cores
    (the emulator runs every execution environment as a process here: a burst of 100 files
    opened 144 pipeline workers on 2 cores; with four per core it took 5-6 s, with two 7-8 s,
    as a throttled run waits a second for a free worker; at most 8, as a Chunk worker holds
    the model, 257 MiB). Nothing else differs from AWS."""
    from chalicelib.embeddings.model_files import REPO_DIR

    return {"Target": "local", "ServiceName": STACK, "BucketName": BUCKET,
            "DatabaseUrl": urls["DATABASE_URL"], "AppDatabaseUrl": functions_login(urls["DATABASE_URL"]),
            "RedisUrl": urls["REDIS_URL"],
            "ModelDir": str(REPO_DIR), "DeletionProtection": "false",
            "PipelineConcurrency": str(min(8, 4 * (os.cpu_count() or 1))),
            # one document's embedding batches at once (KB_EMBED_WIDTH to measure another width),
            # and as many workers: each holds the model, 257 MiB, on the same two cores
            "EmbedWidth": os.environ.get("KB_EMBED_WIDTH", "2"),
            "EmbedConcurrency": os.environ.get("KB_EMBED_WIDTH", "2"),
            # Those workers share this machine's cores (on AWS each has vCPUs of its own): one
            # thread each, not a pool of every core in every worker (chalicelib/embeddings/local.py).
            "EmbedThreads": "1",
            # a front end in development (`KB_CORS_ORIGINS=... make up` for others)
            "CorsOrigins": os.environ.get("KB_CORS_ORIGINS", LOCAL_CORS_ORIGINS),
            # the console at /console offers the demo key written there (never set on AWS)
            "ConsoleDemoKeyFile": str(ENV_FILE),
            "FolderSourceRoots": folder_source_roots()}


def close_emulator_gaps(session, dist: Path, parameters: dict, rest_api_id: str) -> None:
    """What the emulator's CloudFormation accepts but does not apply, applied by hand:
    reserved concurrency (the pipeline's bounds; the embedding function's: each worker
    holds a model) and the REST API's gateway responses (its import of the API definition
    skips them), followed by a deployment so the stage answers with them."""
    import yaml

    def value(v):
        if isinstance(v, dict) and "Ref" in v:
            return parameters.get(v["Ref"], template["Parameters"][v["Ref"]].get("Default"))
        return v

    template = yaml.safe_load((dist / "template.yaml").read_text())
    lam = session.client("lambda")
    for resource in template["Resources"].values():
        props = resource.get("Properties", {})
        if resource["Type"] == "AWS::Serverless::Function" and "ReservedConcurrentExecutions" in props:
            name = props["FunctionName"]["Fn::Sub"].replace("${ServiceName}", STACK)
            lam.put_function_concurrency(FunctionName=name,
                                         ReservedConcurrentExecutions=int(value(props["ReservedConcurrentExecutions"])))
    apigw = session.client("apigateway")
    responses = template["Resources"]["RestAPI"]["Properties"].get("GatewayResponses", {})
    for response_type, response in responses.items():
        apigw.put_gateway_response(restApiId=rest_api_id, responseType=response_type,
                                   responseTemplates=response.get("ResponseTemplates", {}),
                                   **({"statusCode": response["StatusCode"]} if "StatusCode" in response else {}))
    if responses:
        apigw.create_deployment(restApiId=rest_api_id, stageName="api")


def api(method: str, url: str, key: str, body: dict | None = None) -> dict:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method, headers={
        "Authorization": f"Bearer {key}", "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=120) as resp:
            return json.loads(resp.read())
    except urllib.error.HTTPError as err:
        raise SystemExit(f"{method} {url} answered {err.code}: {err.read().decode(errors='replace')}")


def demo_key(database_url: str) -> str:
    from chalicelib.auth import authenticate, issue_key

    existing = read_env_file().get("KB_API_KEY")
    if existing and authenticate(existing):
        return existing
    return issue_key(DEMO_ORG, DEMO_USER)[1]


def demo_agent(api_url: str, key: str) -> tuple[dict, dict]:
    """(the demo knowledge base, the demo agent that links it as a tool): the MCP URL in
    .kb/local.env serves that agent's tools."""
    kbs = api("GET", f"{api_url}/knowledge-bases?limit=100", key)["data"]["items"]
    kb = next((k for k in kbs if k["name"] == DEMO_KB), None) or api(
        "POST", f"{api_url}/knowledge-bases", key,
        {"name": DEMO_KB, "description": "Ships with the repository"})["data"]
    agents = api("GET", f"{api_url}/agents", key)["data"]["items"]
    agent = next((a for a in agents if a["name"] == DEMO_AGENT), None) or api(
        "POST", f"{api_url}/agents", key, {"name": DEMO_AGENT, "description": "Answers from the demo knowledge base"})["data"]
    if not any(t.get("config", {}).get("knowledgeBaseId") == kb["id"] for t in agent["availableTools"]):
        api("POST", f"{api_url}/agents/{agent['id']}/knowledge-base-tools", key,
            {"quickAdd": True, "knowledgeBaseId": kb["id"]})
    return kb, agent


def _sample_document(docs: list[dict]) -> dict | None:
    return next((d for d in docs if d["filename"] == SAMPLE.name), None)


def run_demo(api_url: str, key: str, kb: dict) -> None:
    import boto3

    docs_url = f"{api_url}/knowledge-bases/{kb['id']}/documents"
    doc = _sample_document(api("GET", docs_url, key)["data"]["items"])
    old_verdict = None  # a FAILED written before this run's reindex is not this run's verdict
    if doc is None:
        s3_key = f"kb/{kb['id']}/{SAMPLE.name}"
        boto3.client("s3").put_object(Bucket=BUCKET, Key=s3_key, Body=SAMPLE.read_bytes())
        print(f"uploaded   s3://{BUCKET}/{s3_key}")
    elif doc["status"] == "FAILED":
        # An earlier `make up` that failed (a server that crashed under it, say) leaves the
        # sample FAILED: ingest it again rather than ask the user to delete .kb/.
        error = (doc.get("error") or {}).get("code", "no code")
        old_verdict = api("POST", f"{docs_url}/{doc['id']}/reindex", key)["data"]["updatedAt"]
        print(f"reindexing {doc['id']}: an earlier run left it FAILED ({error})")
    if doc is None or doc["status"] != "PROCESSED":
        deadline, status = time.monotonic() + 240, None
        while time.monotonic() < deadline:
            doc = _sample_document(api("GET", docs_url, key)["data"]["items"])
            if doc and doc["status"] == "FAILED" and doc["updatedAt"] == old_verdict:
                doc = None
            if doc and doc["status"] != status:
                status = doc["status"]
                print(f"document   {doc['id']} {status}")
            if status in ("PROCESSED", "FAILED"):
                break
            time.sleep(1)
        if status != "PROCESSED":
            raise SystemExit(f"the sample document did not ingest (status {status}); "
                             f"see {services.LOGS}/ministack.log")
    answer = api("POST", f"{api_url}/knowledge-bases/{kb['id']}/search", key,
                 {"query": SAMPLE_QUERY, "topK": 3, "debug": True})["data"]
    top = answer["results"][0]
    print(f"\nsearch     \"{SAMPLE_QUERY}\"")
    section = f" § {top['headers'][-1]}" if top.get("headers") else ""
    print(f"top hit    {top['source']}{section}, hybrid score {top['similarity']:.3f}")
    print(f"           {_ranked_by(answer, top)}; 1.0 = first by both")
    print("passage    " + top["content"][:400].replace("\n", "\n           "))
    print(f"\nknowledge base {kb['id']}")


def _ranked_by(answer: dict, hit: dict) -> str:
    """Where hybrid search's two lists put a passage: "first by words (0.425), second by
    meaning (0.384)", from the answer's debug view (each list by its own score)."""
    lists = answer["metadata"]["debug"]["candidates"]
    places = []
    for name, label in (("keyword", "words"), ("semantic", "meaning")):
        ids = [c["chunkId"] for c in lists.get(name, [])]
        if hit["chunkId"] in ids:
            at = ids.index(hit["chunkId"])
            places.append((at, f"{ORDINALS[at] if at < len(ORDINALS) else f'#{at + 1}'} by {label}"
                               f" ({lists[name][at]['score']:.3f})"))
        else:
            places.append((len(ids), f"not found by {label}"))
    return ", ".join(text for _, text in sorted(places))


def resume_cut_runs(session, reconcile_function: str) -> list[str]:
    """The ingestion runs a stop of the emulator cut short, started again now rather than at
    the reconcile sweep's next tick (every 5 minutes): the emulator does not resume the
    executions it was running (it ends them States.ServiceRestart), and their documents
    wait PENDING or PROCESSING. The sweep's own part, at once: the ids it restarted."""
    answer = session.client("lambda").invoke(FunctionName=reconcile_function,
                                              Payload=json.dumps({"only": ["runs"], "minAgeSeconds": 0}).encode())
    report = json.loads(answer["Payload"].read())
    if "FunctionError" in answer or "error" in report.get("runs", {}):
        print(f"warning    could not start again the runs the last stop cut short ({report});"
              " the reconcile sweep retries within 5 minutes")
        return []
    restarted = report["runs"]["restarted"]
    if restarted:
        print(f"resumed    {len(restarted)} ingestion runs the last stop of the emulator cut short")
    return restarted


def up(with_demo: bool) -> None:
    emulator_was_running = services.emulator_healthy()
    urls = services.start_all()
    print(f"postgres   {urls['DATABASE_URL']}\nredis      {urls['REDIS_URL']}\n"
          f"ministack  {urls['AWS_ENDPOINT_URL']}")
    os.environ.update({"DATABASE_URL": urls["DATABASE_URL"], "REDIS_URL": urls["REDIS_URL"]})
    _aws_env(urls["AWS_ENDPOINT_URL"])
    import boto3
    import deploy
    import package

    started = time.monotonic()
    package.package(LOCAL_DIST, with_layers=False)
    session = boto3.Session(region_name=REGION)
    (legacy.remove_hand_made_deployment(session, BUCKET) or legacy.hold_orphaned_bucket(session, BUCKET, STACK)
     or legacy.recreate_partial_stack(session, BUCKET, STACK))
    parameters = _stack_parameters(urls)
    try:
        outputs = deploy.deploy(session, STACK, parameters, LOCAL_DIST, timeout=600)
    except deploy.DeployError as err:
        raise SystemExit(f"{err}\nsee {services.LOGS}/ministack.log")
    close_emulator_gaps(session, LOCAL_DIST, parameters, outputs["RestAPIId"])
    restored = legacy.restore_objects(session, BUCKET)
    if restored:
        print(f"restored   {restored} objects into s3://{BUCKET}")
    api_url = f"{urls['AWS_ENDPOINT_URL']}/restapis/{outputs['RestAPIId']}/api/_user_request_"
    print(f"deployed   stack {STACK} through CloudFormation in {time.monotonic() - started:.0f}s: "
          f"API {outputs['RestAPIId']}, state machine, {outputs['SearchFunctionName']}, "
          f"s3://{BUCKET} notifications; migrations run by the stack")
    key = demo_key(urls["DATABASE_URL"])
    write_env_file({"KB_API_URL": api_url, "KB_API_KEY": key, "KB_BUCKET": BUCKET,
                    "AWS_ENDPOINT_URL": urls["AWS_ENDPOINT_URL"], "AWS_DEFAULT_REGION": REGION,
                    "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
                    "DATABASE_URL": urls["DATABASE_URL"], "REDIS_URL": urls["REDIS_URL"],
                    "KB_APP_DATABASE_URL": functions_login(urls["DATABASE_URL"]),
                    "KB_SEARCH_FUNCTION": outputs["SearchFunctionName"],
                    "KB_RECONCILE_FUNCTION": outputs["ReconcileFunctionName"],
                    "KB_API_FUNCTION": outputs["ApiFunctionName"], "KB_STACK": STACK,
                    "KB_FOLDER_SOURCE_ROOTS": parameters["FolderSourceRoots"]})
    if not emulator_was_running or restored:
        resume_cut_runs(session, outputs["ReconcileFunctionName"])
    kb, agent = demo_agent(api_url, key)
    mcp_url = f"{api_url}/agents/{agent['id']}/mcp"
    write_env_file({**read_env_file(), "KB_MCP_URL": mcp_url})
    if with_demo:
        run_demo(api_url, key, kb)
    print(f"\nKB_API_URL={api_url}\nKB_API_KEY={key}\nKB_MCP_URL={mcp_url}  (the demo agent's tools over MCP)"
          f"\n(written to {ENV_FILE})")
    autoload(api_url, key)
    print(next_steps(api_url, key, agent))


def mcp_client_config(api_url: str, key: str, agent: dict) -> dict:
    """An MCP client's configuration (the `mcpServers` block Claude Desktop, Claude Code and
    Cursor read) that starts `kb mcp` over stdio for the agent."""
    return {"mcpServers": {"kb-" + "-".join(agent["name"].lower().split()): {
        "command": str(ROOT / ".venv" / "bin" / "kb"), "args": ["mcp", "--agent", agent["id"]],
        "env": {"KB_API_URL": api_url, "KB_API_KEY": key}}}}


def next_steps(api_url: str, key: str, agent: dict) -> str:
    """What `make up` says last: where the console is, a command to try, an MCP client's block."""
    env_file = os.path.relpath(ENV_FILE)
    ports = "".join(f"{name}={os.environ[name]} " for name in ("KB_EMULATOR_PORT", "KB_REDIS_PORT")
                    if name in os.environ)
    return (f"\nNext steps\n"
            f"  console   {api_url}/console  (open it in a browser; it offers the demo key)\n"
            f"  kb        source {env_file} && .venv/bin/kb search {shlex.quote(SAMPLE_QUERY)} --kb {shlex.quote(DEMO_KB)}\n"
            f"  stop      {ports}make down   (make status: what runs; docs/local-stack.md: settings, troubleshooting)\n"
            f"  MCP       the demo agent's tools, for an MCP client (Claude Desktop, Claude Code, Cursor):\n"
            + json.dumps(mcp_client_config(api_url, key, agent), indent=2))


# Seed 004's autoload: a project's definitions applied as the stack comes up.
AUTOLOAD_INCLUDE = ("knowledge/**/*.yaml", "agents/**/*.yaml")


def autoload_files(project: Path) -> list[Path]:
    """The files a project's compozy.yaml autoload names (seed 004: `autoload: {enabled,
    include}`), or knowledge/**/*.yaml and agents/**/*.yaml below it."""
    import yaml

    include: tuple | list = AUTOLOAD_INCLUDE
    config = project / "compozy.yaml"
    if config.is_file():
        settings = (yaml.safe_load(config.read_text(encoding="utf-8")) or {}).get("autoload") or {}
        if settings.get("enabled") is False:
            return []
        include = settings.get("include") or AUTOLOAD_INCLUDE
    return sorted({p for pattern in include for p in project.glob(pattern) if p.is_file()})


def autoload(api_url: str, key: str, project: Path | None = None) -> None:
    """Apply the project's definitions (KB_PROJECT_DIR, else the repository) as the demo
    organisation's admin, as `kb apply` would; a definition that fails stops `make up` with
    its message after the others are applied (the stack stays up)."""
    from kbcli import manifests
    from kbcli.client import CliError, Client
    from kbcli.commands.apply import apply
    from kbcli.config import Settings

    project = project or Path(os.environ.get("KB_PROJECT_DIR") or ROOT)
    files = autoload_files(project)
    if not files:
        return
    client = Client(Settings(api_url=api_url, api_key=key, env_file=None))
    try:
        changes = apply(client, manifests.load(str(f) for f in files))
    except CliError as error:
        raise SystemExit(f"autoload   {error.code}: {error.message}") from None
    finally:
        client.close()
    print(f"autoload   {len(files)} files of {project}")
    for change in changes:
        print(f"           {change.kind}/{change.name} {change.action}" + (f" ({change.detail})" if change.detail else ""))
    if any(c.action == "failed" for c in changes):
        raise SystemExit("autoload   some definitions were not applied (above)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    up_cmd = sub.add_parser("up")
    up_cmd.add_argument("--no-demo", action="store_true", help="skip the sample ingestion and search")
    sub.add_parser("down")
    sub.add_parser("status")
    key_cmd = sub.add_parser("key")
    key_cmd.add_argument("org")
    key_cmd.add_argument("user")
    key_cmd.add_argument("--role", choices=("admin", "editor", "viewer"),
                         help="the user's role (default: admin for an organisation's first user, else editor)")
    key_cmd.add_argument("--rate", type=int, help="requests per second for this key (default: the deployment's)")
    key_cmd.add_argument("--groups", help="the user's groups, comma-separated (a knowledge base's access lists"
                                          " name them); given, they replace the user's")
    args = parser.parse_args()
    if args.command == "up":
        up(with_demo=not args.no_demo)
    elif args.command == "down":
        for name, stopped in services.stop_all().items():
            print(f"{name:10} {'stopped' if stopped else 'was not running'}")
    elif args.command == "status":
        state = services.status()
        for name, running in state.items():
            print(f"{name:10} {'running' if running else 'stopped'}")
        env = read_env_file()
        if env.get("KB_API_URL"):
            print(f"{'api':10} {env['KB_API_URL']}")

    elif args.command == "key":
        if not services.postgres_running():
            raise SystemExit("the stack is not running: run `make up` first")
        os.environ["DATABASE_URL"] = services.postgres_up()
        from chalicelib.auth import issue_key

        groups = None if args.groups is None else [g.strip() for g in args.groups.split(",") if g.strip()]
        principal, key = issue_key(args.org, args.user, args.role, rate_per_second=args.rate, groups=groups)
        print(f"# {args.user} in {args.org}: {principal.role}" + (f", groups {', '.join(groups)}" if groups else ""),
              file=sys.stderr)
        print(key)


if __name__ == "__main__":
    main()
