"""The emulator's own floor under the gateway figures of bench/api_overhead.py: throwaway
functions configured as the deployed API function is (runtime, memory, timeout), whose handler
only returns a small API Gateway proxy response, each behind a REST API of its own with the
search route as a proxy integration (as Chalice's template deploys ours). Measured by the same
closed loop as our API (api.closed_loop), they say what ministack itself allows per request.

Three variants, because ministack's worker keeps its lock after each response until stderr has
been quiet for 5 ms, or for 50 ms when nothing came (lambda_runtime.Worker._drain_stderr_bounded),
and because an answer's bytes cross the worker's pipe, the gateway and the client:
- "one log line" prints what our API prints per cached search (chalicelib.metrics.record_search's
  EMF line; print() is stderr on ministack's workers);
- "one log line, our answer's size" also answers as many bytes as our API's answer to the same
  bodies (measured by api_overhead.floor), so only the service's own work is left between the two;
- "silent" prints nothing.

Every resource is named gwfloor-<variant>-<random> and deleted on leaving floor_apis(), also
when the measurement fails.
"""
import contextlib
import io
import json
import secrets
import zipfile

from api import API_FUNCTION
from common import aws_client, local_env

HANDLER = '''import json
import os

LINE = os.environ.get("FLOOR_LOG_LINE")
PADDING = max(0, int(os.environ.get("FLOOR_BODY_BYTES", 0)) - len(json.dumps({"results": [], "floor": True, "pad": ""})))
BODY = json.dumps({"results": [], "floor": True, "pad": "x" * PADDING})
RESPONSE = {"statusCode": 200, "headers": {"Content-Type": "application/json"}, "body": BODY}


def handler(event, context):
    if LINE:
        print(LINE)
    return RESPONSE
'''
ROUTE = ("knowledge-bases", "{kb_id}", "search")  # our search route; the floor ignores the path
TRUST = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": {"Service": "lambda.amazonaws.com"},
                                                 "Action": "sts:AssumeRole"}]}


def search_log_line() -> str:
    """The line our API prints per search, made by the service's own code."""
    from chalicelib import metrics

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        metrics.record_search(metrics.SearchEvent(
            query_hash="c12c77a1914d0754", strategy="semantic", result_count=5, average_similarity=0.489536,
            took_ms=1.48, results_cached=True, org_id="org_9cc4987b60f5ab1f",
            knowledge_base_ids=("kb_b718647c2bac060d",)))
    line = out.getvalue().strip()
    if not line or "\n" in line:
        raise SystemExit(f"metrics.record_search printed {line!r}, not one line: is it quieted (common.quiet_metrics)?")
    return line


def _zip() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as z:
        z.writestr("floor.py", HANDLER)
    return buffer.getvalue()


@contextlib.contextmanager
def floor_apis(answer_bytes: int):
    """{variant: URL of its search route}, the functions and APIs deleted when the block ends;
    answer_bytes: the size of our API's answer, which one variant's answers match."""
    lam, apigw, iam, logs = (aws_client(s) for s in ("lambda", "apigateway", "iam", "logs"))
    api_function = lam.get_function_configuration(FunctionName=API_FUNCTION)
    base, deployed = local_env()["KB_API_URL"].split("/restapis/")
    stage_path = deployed.split("/", 1)[1]  # "api/_user_request_", as bench/api.py's URLs have it
    suffix = secrets.token_hex(3)
    line = search_log_line()
    variants = {"one log line": {"FLOOR_LOG_LINE": line},
                "one log line, our answer's size": {"FLOOR_LOG_LINE": line, "FLOOR_BODY_BYTES": str(answer_bytes)},
                "silent": {}}
    urls = {}
    with contextlib.ExitStack() as cleanup:
        role = iam.create_role(RoleName=f"gwfloor-role-{suffix}", AssumeRolePolicyDocument=json.dumps(TRUST))["Role"]
        cleanup.callback(iam.delete_role, RoleName=role["RoleName"])
        for variant, environment in variants.items():
            name = "gwfloor-" + "".join(c if c.isalnum() else "-" for c in variant) + f"-{suffix}"
            function = lam.create_function(
                FunctionName=name, Runtime=api_function["Runtime"], MemorySize=api_function["MemorySize"],
                Timeout=api_function["Timeout"], Architectures=api_function.get("Architectures", ["x86_64"]),
                Role=role["Arn"], Handler="floor.handler", Code={"ZipFile": _zip()},
                Environment={"Variables": environment})
            cleanup.callback(_delete_log_group, logs, f"/aws/lambda/{name}")
            cleanup.callback(lam.delete_function, FunctionName=name)
            lam.get_waiter("function_active_v2").wait(FunctionName=name, WaiterConfig={"Delay": 0.2, "MaxAttempts": 100})
            rest_api = apigw.create_rest_api(name=name)["id"]
            cleanup.callback(apigw.delete_rest_api, restApiId=rest_api)
            parent = apigw.get_resources(restApiId=rest_api)["items"][0]["id"]  # "/"
            for part in ROUTE:
                parent = apigw.create_resource(restApiId=rest_api, parentId=parent, pathPart=part)["id"]
            apigw.put_method(restApiId=rest_api, resourceId=parent, httpMethod="POST", authorizationType="NONE")
            region = function["FunctionArn"].split(":")[3]
            apigw.put_integration(
                restApiId=rest_api, resourceId=parent, httpMethod="POST", type="AWS_PROXY", integrationHttpMethod="POST",
                uri=f"arn:aws:apigateway:{region}:lambda:path/2015-03-31/functions/{function['FunctionArn']}/invocations")
            lam.add_permission(FunctionName=name, StatementId="apigateway", Action="lambda:InvokeFunction",
                               Principal="apigateway.amazonaws.com")
            apigw.create_deployment(restApiId=rest_api, stageName=stage_path.split("/")[0])
            urls[variant] = f"{base}/restapis/{rest_api}/{stage_path}/knowledge-bases/floor/search"
            _check(urls[variant])
        yield urls


def _check(url: str) -> None:
    """One request answered as the floor answers: a misrouted closed loop would hang at its barrier."""
    import requests

    answer = requests.post(url, json={"query": "check"}, timeout=60)
    if answer.status_code != 200 or {**answer.json(), "pad": ""} != {"results": [], "floor": True, "pad": ""}:
        raise SystemExit(f"the floor API at {url} answered {answer.status_code}: {answer.text[:300]}")


def _delete_log_group(logs, name: str) -> None:
    with contextlib.suppress(logs.exceptions.ResourceNotFoundException):
        logs.delete_log_group(logGroupName=name)
