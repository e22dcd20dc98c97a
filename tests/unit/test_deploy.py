"""The deployment glue against moto: every route is wired, the state machine names
real functions, and a second deploy updates in place."""
import json
import sys

import boto3
import pytest
from moto import mock_aws

from tests.conftest import ROOT

sys.path.insert(0, str(ROOT / "localstack"))
import deploy  # noqa: E402

ENV = {"DATABASE_URL": "postgresql://x", "REDIS_URL": "redis://x", "KB_BUCKET": "kb-test"}


@pytest.fixture
def session(monkeypatch):
    for var in ("AWS_ENDPOINT_URL",):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    with mock_aws():
        yield boto3.Session(region_name="us-east-1")


def test_deploy_wires_every_part(session):
    out = deploy.deploy(session, "http://localhost:4566", ENV, "kb-test")

    sfn = session.client("stepfunctions")
    definition = json.loads(sfn.describe_state_machine(stateMachineArn=out["stateMachineArn"])["definition"])
    resources = json.dumps(definition)
    assert "${" not in resources
    assert definition["States"]["Embed"]["Type"] == "Map"
    assert definition["States"]["Extract"]["Catch"][0]["Next"] == "MarkFailed"

    notification = session.client("s3").get_bucket_notification_configuration(Bucket="kb-test")
    config = notification["LambdaFunctionConfigurations"][0]
    assert config["LambdaFunctionArn"] == out["triggerFunctionArn"]
    assert set(config["Events"]) == {"s3:ObjectCreated:*", "s3:ObjectRemoved:*"}

    trigger_env = session.client("lambda").get_function_configuration(
        FunctionName="kb-service-s3-trigger")["Environment"]["Variables"]
    assert trigger_env["STATE_MACHINE_ARN"] == out["stateMachineArn"]

    apigw = session.client("apigateway")
    methods = {(r["path"], m) for r in apigw.get_resources(restApiId=out["apiId"])["items"]
               for m in r.get("resourceMethods", {})}
    assert {("/knowledge-bases", "POST"), ("/knowledge-bases", "GET"),
            ("/knowledge-bases/{kb_id}/documents", "GET"),
            ("/knowledge-bases/{kb_id}/search", "POST")} <= methods
    resource = next(r for r in apigw.get_resources(restApiId=out["apiId"])["items"]
                    if r["path"] == "/knowledge-bases/{kb_id}/search")
    integration = apigw.get_integration(restApiId=out["apiId"], resourceId=resource["id"], httpMethod="POST")
    assert integration["type"] == "AWS_PROXY"
    assert "kb-service-api" in integration["uri"]
    assert out["apiUrl"] == f"http://localhost:4566/restapis/{out['apiId']}/api/_user_request_"


def test_second_deploy_updates_in_place(session):
    first = deploy.deploy(session, "http://localhost:4566", ENV, "kb-test")
    paths_before = sorted(r["path"] for r in session.client("apigateway").get_resources(
        restApiId=first["apiId"])["items"])
    second = deploy.deploy(session, "http://localhost:4566", {**ENV, "REDIS_URL": "redis://y"}, "kb-test")
    assert second["apiId"] == first["apiId"]
    assert len(session.client("apigateway").get_rest_apis()["items"]) == 1
    paths_after = sorted(r["path"] for r in session.client("apigateway").get_resources(
        restApiId=second["apiId"])["items"])
    assert paths_after == paths_before
    env = session.client("lambda").get_function_configuration(FunctionName="kb_search")["Environment"]["Variables"]
    assert env["REDIS_URL"] == "redis://y"
    assert len(session.client("stepfunctions").list_state_machines()["stateMachines"]) == 1


def test_package_holds_the_app_and_its_sql():
    import io
    import zipfile

    names = zipfile.ZipFile(io.BytesIO(deploy.build_package())).namelist()
    assert "app.py" in names
    assert "chalicelib/storage/migrations/0001_init.sql" in names
    assert not any("test" in n.split("/")[0] for n in names)
