"""The deployed alarms and dashboard watch what the service really emits: every alarm and
widget on the service's own metrics names a metric, namespace and dimensions found in the
EMF lines the functions printed during this test (read back from the stack's log groups),
and every alarm on an AWS metric names a resource of the stack."""
import base64
import json
import re
import secrets
import time

import pytest

from tests.e2e.conftest import wait_for_status

BUCKET = "kb-documents-local"
SERVICE_NAMESPACE = "KnowledgeBaseService"
SEARCH = re.compile(r"SEARCH\('\{([^}]*)\}\s+MetricName=\"([^\"]+)\"")


@pytest.fixture(scope="module")
def cloud(aws, local_env):
    return {name: aws.client(name, endpoint_url=local_env["AWS_ENDPOINT_URL"])
            for name in ("cloudwatch", "logs", "cloudformation", "apigateway")}


@pytest.fixture(scope="module")
def emitted(api, s3, cloud, local_env):
    """(namespace, metric, {dimension: value}) of every EMF line the stack's functions printed
    after a failed document, an uploaded and an embedded one, and a search of each strategy."""
    started_ms = int(time.time() * 1000)
    kb = api.call("POST", "/knowledge-bases", {"name": f"Alarms {secrets.token_hex(3)}"}).json()["data"]
    s3.put_object(Bucket=BUCKET, Key=f"kb/{kb['id']}/blank.txt", Body=b" \n\t\n ")
    failed, _ = wait_for_status(api, kb["id"], "blank.txt")
    assert (failed["status"], failed["error"]["code"]) == ("FAILED", "NO_TEXT")
    text = "Pumps are primed before the valve opens. " * 400  # several embedding batches
    answer = api.call("POST", f"/knowledge-bases/{kb['id']}/documents",
                      {"filename": "pumps.txt", "content": base64.b64encode(text.encode()).decode()})
    assert answer.status_code in (200, 201, 202), answer.text
    assert wait_for_status(api, kb["id"], "pumps.txt")[0]["status"] == "PROCESSED"
    for strategy in ("hybrid", "semantic", "keyword"):
        found = api.call("POST", f"/knowledge-bases/{kb['id']}/search", {"query": "pump valve", "strategy": strategy})
        assert found.status_code == 200, found.text
    return _emf_lines(cloud["logs"], local_env["KB_STACK"], started_ms,
                      want={("DocumentsFailed", ("errorCode",)), ("SearchLatency", ("strategy",))})


def _emf_lines(logs, stack: str, since_ms: int, want: set) -> set:
    found, deadline = set(), time.monotonic() + 30
    while time.monotonic() < deadline:
        found = set()
        groups = logs.describe_log_groups(logGroupNamePrefix=f"/aws/lambda/{stack}-")["logGroups"]
        for group in groups:
            kwargs = {"logGroupName": group["logGroupName"], "startTime": since_ms, "filterPattern": "_aws"}
            while True:
                page = logs.filter_log_events(**kwargs)
                for event in page["events"]:
                    found |= _metrics_of(event["message"])
                if not page.get("nextToken"):
                    break
                kwargs["nextToken"] = page["nextToken"]
        names = {(metric, tuple(sorted(set(dims) - {"service"}))) for _, metric, dims in
                 ((n, m, dict(d)) for n, m, d in found)}
        if want <= names:
            return found
        time.sleep(1)
    raise AssertionError(f"the functions printed no EMF for {want - names}; found {sorted(found)}")


def _metrics_of(message: str) -> set:
    try:
        line = json.loads(message[message.index("{"):])
    except ValueError:
        return set()
    out = set()
    for directive in (line.get("_aws") or {}).get("CloudWatchMetrics", []):
        for dimension_set in directive["Dimensions"]:
            dims = tuple(sorted((d, str(line[d])) for d in dimension_set))
            out |= {(directive["Namespace"], m["Name"], dims) for m in directive["Metrics"]}
    return out


def _alarms(cloud, stack: str) -> list[dict]:
    return [a for a in cloud["cloudwatch"].describe_alarms(AlarmNamePrefix=f"{stack}-")["MetricAlarms"]]


def _dashboard_metrics(cloud, stack: str) -> tuple[list, list]:
    """(the metric lines [namespace, name, dim, value, ...], the SEARCH expressions' (schema, name))."""
    body = json.loads(cloud["cloudwatch"].get_dashboard(DashboardName=stack)["DashboardBody"])
    lines, searches = [], []
    for widget in body["widgets"]:
        for metric in widget["properties"].get("metrics", []):
            if isinstance(metric[0], dict):
                schema, name = SEARCH.search(metric[0]["expression"]).groups()
                searches.append((tuple(s.strip() for s in schema.split(",")), name))
            else:
                lines.append([m for m in metric if not isinstance(m, dict)])
    return lines, searches


def test_every_alarm_on_a_service_metric_names_what_the_functions_emit(cloud, emitted, local_env):
    watched = [a for a in _alarms(cloud, local_env["KB_STACK"]) if a["Namespace"] == SERVICE_NAMESPACE]
    assert {a["MetricName"] for a in watched} == {"DocumentsFailed"}
    for alarm in watched:
        dims = tuple(sorted((d["Name"], d["Value"]) for d in alarm["Dimensions"]))
        assert (alarm["Namespace"], alarm["MetricName"], dims) in emitted, (alarm["AlarmName"], sorted(emitted))


def test_every_dashboard_widget_on_a_service_metric_names_what_the_functions_emit(cloud, emitted, local_env):
    lines, searches = _dashboard_metrics(cloud, local_env["KB_STACK"])
    service_lines = [m for m in lines if m[0] == SERVICE_NAMESPACE]
    assert len(service_lines) >= 4 and len(searches) >= 3
    for line in service_lines:
        namespace, name, *pairs = line
        dims = tuple(sorted(zip(pairs[::2], pairs[1::2])))
        assert (namespace, name, dims) in emitted, (line, sorted(emitted))
    for (namespace, *dimension_names), name in searches:
        assert any(ns == namespace and metric == name and sorted(d for d, _ in dims) == sorted(dimension_names)
                   for ns, metric, dims in emitted), (namespace, dimension_names, name, sorted(emitted))


def test_the_failed_documents_metric_counts_by_error_code(emitted):
    assert ("KnowledgeBaseService", "DocumentsFailed", (("errorCode", "NO_TEXT"), ("service", "kb-service"))) in emitted


def test_every_alarm_on_an_aws_metric_names_a_resource_of_the_stack(cloud, local_env):
    stack = local_env["KB_STACK"]
    resources = cloud["cloudformation"].describe_stack_resources(StackName=stack)["StackResources"]
    physical = {r["ResourceType"]: set() for r in resources}
    for r in resources:
        physical[r["ResourceType"]].add(r["PhysicalResourceId"])
    queues = {url.rsplit("/", 1)[-1] for url in physical["AWS::SQS::Queue"]}
    functions = physical["AWS::Lambda::Function"]
    apis = {cloud["apigateway"].get_rest_api(restApiId=i)["name"] for i in physical["AWS::ApiGateway::RestApi"]}
    stages = {s["stageName"] for i in physical["AWS::ApiGateway::RestApi"]
              for s in cloud["apigateway"].get_stages(restApiId=i)["item"]}
    known = {"QueueName": queues, "FunctionName": functions, "ApiName": apis, "Stage": stages,
             "StateMachineArn": physical["AWS::StepFunctions::StateMachine"]}
    alarms = [a for a in _alarms(cloud, stack) if a["Namespace"].startswith("AWS/")]
    # the Lambda Errors alarm of every function, and the others the template declares
    assert {a["Dimensions"][0]["Value"] for a in alarms if a["MetricName"] == "Errors"} == functions
    assert len(alarms) >= len(functions) + 7
    for alarm in alarms:
        for dim in alarm["Dimensions"]:
            assert dim["Value"] in known[dim["Name"]], (alarm["AlarmName"], dim, known.get(dim["Name"]))
    topics = {a for alarm in alarms for a in alarm["AlarmActions"]}
    assert len(topics) == 1 and topics <= physical["AWS::SNS::Topic"]
