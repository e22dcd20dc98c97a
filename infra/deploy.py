"""Deploys dist/ (infra/package.py) as one CloudFormation stack: on AWS, or on the emulator.

    python infra/deploy.py --stack kb-service [--param Key=Value ...]   (make deploy-aws)

What `aws cloudformation package` + `deploy` would do, with boto3 so that the same code
serves the emulator (which `make up` drives through localstack/stack.py): the artifacts go
to an artifacts bucket under their content hash (an unchanged zip is not uploaded again, and
a changed one changes the template, so CloudFormation updates the function), the local paths
in the template become S3 locations, and the stack is created or updated and waited for.
"""
import argparse
import hashlib
import json
import sys
import time
from pathlib import Path

import boto3
import yaml
from botocore.exceptions import ClientError

ROOT = Path(__file__).resolve().parent.parent
DIST = ROOT / "dist"
CAPABILITIES = ["CAPABILITY_IAM", "CAPABILITY_NAMED_IAM", "CAPABILITY_AUTO_EXPAND"]
TEMPLATE_BODY_LIMIT = 51_200  # CloudFormation's TemplateBody limit; larger goes by TemplateURL
DONE = {"CREATE_COMPLETE", "UPDATE_COMPLETE", "IMPORT_COMPLETE"}
FAILED_SUFFIXES = ("FAILED", "ROLLBACK_COMPLETE", "ROLLBACK_FAILED")


class DeployError(RuntimeError):
    pass


def wait_until_updated(lambda_client, name: str) -> None:
    """Until the function's last update has finished (at most 20 s)."""
    for _ in range(100):
        status = lambda_client.get_function_configuration(FunctionName=name).get("LastUpdateStatus")
        if status in (None, "Successful", "Failed"):
            return
        time.sleep(0.2)


def artifacts_bucket(session: boto3.Session, stack: str) -> str:
    """A private, encrypted bucket for the stack's code, layers and template."""
    account = session.client("sts").get_caller_identity()["Account"]
    name = f"{stack}-artifacts-{account}-{session.region_name}"[:63]
    s3 = session.client("s3")
    try:
        s3.head_bucket(Bucket=name)
        return name
    except ClientError:
        pass
    args = {} if session.region_name == "us-east-1" else {
        "CreateBucketConfiguration": {"LocationConstraint": session.region_name}}
    s3.create_bucket(Bucket=name, **args)
    s3.put_public_access_block(Bucket=name, PublicAccessBlockConfiguration={
        "BlockPublicAcls": True, "IgnorePublicAcls": True, "BlockPublicPolicy": True,
        "RestrictPublicBuckets": True})
    s3.put_bucket_encryption(Bucket=name, ServerSideEncryptionConfiguration={
        "Rules": [{"ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}]})
    return name


def upload(session: boto3.Session, bucket: str, path: Path) -> dict:
    """The file under its content hash; returns its S3 location."""
    digest = hashlib.sha256(path.read_bytes()).hexdigest()[:32]
    key = f"artifacts/{path.stem}-{digest}{path.suffix}"
    s3 = session.client("s3")
    try:
        s3.head_object(Bucket=bucket, Key=key)
    except ClientError:
        s3.upload_file(str(path), bucket, key)
    return {"Bucket": bucket, "Key": key}


def resolve_artifacts(session: boto3.Session, bucket: str, template: dict, dist: Path) -> dict:
    """Local CodeUri/ContentUri paths become S3 locations. A layer whose zip was not built
    (the emulator skips layers; its resources are conditioned on Target=aws) points at the
    code bundle, which SAM accepts and the condition never creates."""
    code = upload(session, bucket, dist / "deployment.zip")
    for resource in template["Resources"].values():
        props = resource.get("Properties", {})
        for field in ("CodeUri", "ContentUri"):
            value = props.get(field)
            if isinstance(value, str) and not value.startswith("s3://"):
                path = (dist / value).resolve()
                props[field] = upload(session, bucket, path) if path.is_file() else dict(code)
    return template


def _template_argument(session: boto3.Session, bucket: str, template: dict) -> dict:
    body = json.dumps(template, separators=(",", ":"))
    if len(body) <= TEMPLATE_BODY_LIMIT:
        return {"TemplateBody": body}
    key = f"templates/{hashlib.sha256(body.encode()).hexdigest()[:32]}.json"
    s3 = session.client("s3")
    s3.put_object(Bucket=bucket, Key=key, Body=body.encode())
    endpoint = s3.meta.endpoint_url.rstrip("/")
    return {"TemplateURL": f"{endpoint}/{bucket}/{key}"}


def stack_status(cfn, stack: str) -> str | None:
    try:
        return cfn.describe_stacks(StackName=stack)["Stacks"][0]["StackStatus"]
    except ClientError as err:
        if "does not exist" in str(err):
            return None
        raise


def _failure_events(cfn, stack: str, limit: int = 8) -> str:
    events = cfn.describe_stack_events(StackName=stack).get("StackEvents", [])
    failed = [e for e in events if e.get("ResourceStatus", "").endswith("FAILED")][:limit]
    return "\n".join(f"  {e['LogicalResourceId']}: {e.get('ResourceStatusReason', '')}" for e in failed)


def wait(cfn, stack: str, timeout: float = 3600, poll: float = 1.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = stack_status(cfn, stack)
        if status in DONE:
            return status
        if status is None or status.endswith(FAILED_SUFFIXES):
            raise DeployError(f"stack {stack} ended {status}:\n{_failure_events(cfn, stack)}")
        time.sleep(poll)
    raise DeployError(f"stack {stack} still {stack_status(cfn, stack)} after {timeout:.0f}s")


# Embedding workers reserved per unit of EmbedWidth: two documents' fan-outs at full width
# at once, so a second large document does not wait for the first's last batch.
EMBED_WORKERS_PER_WIDTH = 2


def sized(parameters: dict) -> dict:
    """The parameters with EmbedConcurrency sized from EmbedWidth when only the width is given
    (CloudFormation does no arithmetic)."""
    if "EmbedWidth" in parameters and "EmbedConcurrency" not in parameters:
        return {**parameters, "EmbedConcurrency": str(EMBED_WORKERS_PER_WIDTH * int(parameters["EmbedWidth"]))}
    return parameters


def deploy(session: boto3.Session, stack: str, parameters: dict, dist: Path = DIST,
           timeout: float = 3600) -> dict:
    """Create or update the stack from dist/; returns its outputs."""
    cfn = session.client("cloudformation")
    parameters = sized(parameters)
    bucket = artifacts_bucket(session, stack)
    template = resolve_artifacts(session, bucket, yaml.safe_load((dist / "template.yaml").read_text()), dist)
    args = dict(StackName=stack, Capabilities=CAPABILITIES,
                Parameters=[{"ParameterKey": k, "ParameterValue": str(v)} for k, v in parameters.items()],
                **_template_argument(session, bucket, template))
    status = stack_status(cfn, stack)
    if status == "ROLLBACK_COMPLETE":  # a first create that failed cannot be updated
        cfn.delete_stack(StackName=stack)
        _wait_deleted(cfn, stack, timeout)
        status = None
    try:
        if status is None:
            cfn.create_stack(**args, OnFailure="ROLLBACK" if parameters.get("Target") == "aws" else "DO_NOTHING")
        else:
            cfn.update_stack(**args)
    except ClientError as err:
        if "No updates are to be performed" not in str(err):
            raise
    wait(cfn, stack, timeout)
    return outputs(cfn, stack)


def _wait_deleted(cfn, stack: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while stack_status(cfn, stack) not in (None, "DELETE_COMPLETE") and time.monotonic() < deadline:
        time.sleep(1)


def outputs(cfn, stack: str) -> dict:
    described = cfn.describe_stacks(StackName=stack)["Stacks"][0]
    return {o["OutputKey"]: o["OutputValue"] for o in described.get("Outputs", [])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stack", default="kb-service")
    parser.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                        help="a template parameter (repeatable), e.g. EmbeddingProvider=bedrock")
    parser.add_argument("--dist", type=Path, default=DIST)
    args = parser.parse_args()
    parameters = {"Target": "aws", "ServiceName": args.stack,
                  **dict(p.split("=", 1) for p in args.param)}
    session = boto3.Session()
    if not session.region_name:
        raise SystemExit("no region: set AWS_REGION or AWS_DEFAULT_REGION")
    try:
        result = deploy(session, args.stack, parameters, args.dist)
    except DeployError as err:
        raise SystemExit(str(err))
    for key, value in sorted(result.items()):
        print(f"{key:24} {value}")


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main()
