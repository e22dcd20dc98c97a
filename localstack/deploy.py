"""Deploys the stack onto an AWS-compatible endpoint (ministack or LocalStack on :4566).

`chalice deploy` cannot finish against ministack (botocore fails to parse its
UpdateRestApi answer, and ImportRestApi creates an empty API), so this does what
it does with boto3: the API's routes come from Chalice's own swagger generator,
and the rest (S3 notifications, the state
machine, the pipeline and kb_search Lambdas) is created here. Running it again
updates everything in place.
"""
import io
import json
import sys
import time
import zipfile
from pathlib import Path

import boto3
from botocore.exceptions import ClientError

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

PREFIX = "kb-service"
STAGE = "api"
STATE_MACHINE = f"{PREFIX}-ingestion"
# Lambda name -> handler in app.py
PIPELINE_FUNCTIONS = {
    "Extract": "pipeline_extract", "Chunk": "pipeline_chunk", "Embed": "pipeline_embed",
    "Store": "pipeline_store", "Finalize": "pipeline_finalize", "MarkFailed": "pipeline_mark_failed",
}
EMBED_CONCURRENCY = 2
LAMBDA_TRUST = {"Version": "2012-10-17", "Statement": [{
    "Effect": "Allow", "Principal": {"Service": "lambda.amazonaws.com"}, "Action": "sts:AssumeRole"}]}
STATES_TRUST = {"Version": "2012-10-17", "Statement": [{
    "Effect": "Allow", "Principal": {"Service": "states.amazonaws.com"}, "Action": "sts:AssumeRole"}]}


def build_package() -> bytes:
    """The deployment zip: app.py and chalicelib/. Third-party packages come from
    the runtime (a Lambda layer on AWS; the emulator's Python environment locally)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.write(ROOT / "app.py", "app.py")
        for path in sorted((ROOT / "chalicelib").rglob("*")):
            if path.is_file() and path.suffix in (".py", ".sql", ".json"):
                zf.write(path, str(path.relative_to(ROOT)))
    return buf.getvalue()


def wait_until_updated(lambda_client, name: str) -> None:
    """Until the function's last update has finished (at most 20 s)."""
    for _ in range(100):
        status = lambda_client.get_function_configuration(FunctionName=name).get("LastUpdateStatus")
        if status in (None, "Successful", "Failed"):
            return
        time.sleep(0.2)


class Deployer:
    def __init__(self, session: boto3.Session, env: dict, bucket: str):
        self.session, self.env, self.bucket = session, env, bucket
        self.region = session.region_name
        self.account = session.client("sts").get_caller_identity()["Account"]
        self.lambda_ = session.client("lambda")

    def _role(self, name: str, trust: dict) -> str:
        iam = self.session.client("iam")
        try:
            return iam.get_role(RoleName=name)["Role"]["Arn"]
        except ClientError:
            return iam.create_role(RoleName=name, AssumeRolePolicyDocument=json.dumps(trust))["Role"]["Arn"]

    def function(self, name: str, handler: str, code: bytes, env: dict, timeout: int = 300,
                 reserved_concurrency: int | None = None) -> str:
        arn = self._create_or_update(name, handler, code, env, timeout)
        if reserved_concurrency is not None:
            self.lambda_.put_function_concurrency(FunctionName=name,
                                                  ReservedConcurrentExecutions=reserved_concurrency)
        return arn

    def _create_or_update(self, name: str, handler: str, code: bytes, env: dict, timeout: int) -> str:
        config = dict(FunctionName=name, Runtime="python3.11", Handler=f"app.{handler}",
                      Role=self._role(f"{PREFIX}-lambda", LAMBDA_TRUST), Timeout=timeout,
                      MemorySize=2048, Environment={"Variables": env})
        try:
            self.lambda_.get_function(FunctionName=name)
        except ClientError:
            return self.lambda_.create_function(Code={"ZipFile": code}, **config)["FunctionArn"]
        self.lambda_.update_function_code(FunctionName=name, ZipFile=code)
        self._wait_updated(name)
        arn = self.lambda_.update_function_configuration(**config)["FunctionArn"]
        self._wait_updated(name)
        return arn

    def _wait_updated(self, name: str) -> None:
        wait_until_updated(self.lambda_, name)

    def allow_invoke(self, function: str, principal: str, source_arn: str) -> None:
        try:
            self.lambda_.add_permission(FunctionName=function, StatementId=principal.split(".")[0] + "-invoke",
                                        Action="lambda:InvokeFunction", Principal=principal,
                                        SourceArn=source_arn)
        except ClientError as err:
            if err.response["Error"]["Code"] != "ResourceConflictException":
                raise

    def state_machine(self, function_arns: dict) -> str:
        definition = (ROOT / "infra" / "ingestion.asl.json").read_text()
        for state, arn in function_arns.items():
            definition = definition.replace("${%sFunctionArn}" % state, arn)
        sfn = self.session.client("stepfunctions")
        role = self._role(f"{PREFIX}-states", STATES_TRUST)
        arn = f"arn:aws:states:{self.region}:{self.account}:stateMachine:{STATE_MACHINE}"
        try:
            sfn.describe_state_machine(stateMachineArn=arn)
            sfn.update_state_machine(stateMachineArn=arn, definition=definition, roleArn=role)
        except ClientError:
            arn = sfn.create_state_machine(name=STATE_MACHINE, definition=definition,
                                           roleArn=role)["stateMachineArn"]
        return arn

    def schedule(self, function_arn: str, rule: str, expression: str) -> None:
        events = self.session.client("events")
        rule_arn = events.put_rule(Name=rule, ScheduleExpression=expression, State="ENABLED")["RuleArn"]
        self.allow_invoke(function_arn, "events.amazonaws.com", rule_arn)
        events.put_targets(Rule=rule, Targets=[{"Id": "1", "Arn": function_arn}])

    def bucket_notifications(self, trigger_arn: str) -> None:
        s3 = self.session.client("s3")
        try:
            s3.head_bucket(Bucket=self.bucket)
        except ClientError:
            s3.create_bucket(Bucket=self.bucket)
        self.allow_invoke(trigger_arn, "s3.amazonaws.com", f"arn:aws:s3:::{self.bucket}")
        only_documents = {"Key": {"FilterRules": [{"Name": "prefix", "Value": "kb/"}]}}
        s3.put_bucket_notification_configuration(Bucket=self.bucket, NotificationConfiguration={
            "LambdaFunctionConfigurations": [{
                "Id": "kb-ingestion", "LambdaFunctionArn": trigger_arn,
                "Events": ["s3:ObjectCreated:*", "s3:ObjectRemoved:*"], "Filter": only_documents,
            }]})

    def rest_api(self, api_arn: str) -> str:
        """Resources and proxy integrations for every route of the Chalice app, built
        with the plain API Gateway calls (ministack does not implement ImportRestApi).
        The swagger document comes from Chalice's own generator."""
        from chalice.deploy.swagger import SwaggerGenerator

        import app as chalice_app

        swagger = SwaggerGenerator(self.region, {"api_handler_arn": api_arn}).generate_swagger(chalice_app.app)
        apigw = self.session.client("apigateway")
        existing = [a for a in apigw.get_rest_apis(limit=500)["items"] if a["name"] == PREFIX]
        api_id = existing[0]["id"] if existing else apigw.create_rest_api(name=PREFIX)["id"]
        resources = {r["path"]: r for r in apigw.get_resources(restApiId=api_id, limit=500)["items"]}
        for path, operations in swagger["paths"].items():
            resource = self._resource(apigw, api_id, resources, path)
            for method, operation in operations.items():
                if method.lower() in ("get", "post", "put", "patch", "delete", "head", "options"):
                    self._proxy_method(apigw, api_id, resource, method.upper(),
                                       operation["x-amazon-apigateway-integration"]["uri"])
        apigw.create_deployment(restApiId=api_id, stageName=STAGE)
        self.allow_invoke(api_arn, "apigateway.amazonaws.com",
                          f"arn:aws:execute-api:{self.region}:{self.account}:{api_id}/*")
        return api_id

    @staticmethod
    def _resource(apigw, api_id: str, resources: dict, path: str) -> dict:
        parent = resources["/"]
        for depth, part in enumerate(path.strip("/").split("/"), start=1):
            sub_path = "/" + "/".join(path.strip("/").split("/")[:depth])
            if sub_path not in resources:
                resources[sub_path] = apigw.create_resource(restApiId=api_id, parentId=parent["id"],
                                                            pathPart=part)
            parent = resources[sub_path]
        return parent

    @staticmethod
    def _proxy_method(apigw, api_id: str, resource: dict, method: str, uri: str) -> None:
        if method not in (resource.get("resourceMethods") or {}):
            apigw.put_method(restApiId=api_id, resourceId=resource["id"], httpMethod=method,
                             authorizationType="NONE")
        apigw.put_integration(restApiId=api_id, resourceId=resource["id"], httpMethod=method,
                              type="AWS_PROXY", integrationHttpMethod="POST", uri=uri)


def deploy(session: boto3.Session, endpoint_url: str, env: dict, bucket: str) -> dict:
    """Deploy everything; returns the outputs (function names, ARNs, API URL)."""
    deployer = Deployer(session, env, bucket)
    code = build_package()
    # Each embedding worker holds a model in memory: bound them; Step Functions
    # retries a throttled batch.
    arns = {state: deployer.function(f"{PREFIX}-{handler.replace('_', '-')}", handler, code, env,
                                     reserved_concurrency=EMBED_CONCURRENCY if state == "Embed" else None)
            for state, handler in PIPELINE_FUNCTIONS.items()}
    state_machine_arn = deployer.state_machine(arns)
    env = {**env, "STATE_MACHINE_ARN": state_machine_arn}  # the trigger and the API start runs
    trigger_arn = deployer.function(f"{PREFIX}-s3-trigger", "s3_trigger", code, env, timeout=60)
    deployer.bucket_notifications(trigger_arn)
    reconcile_arn = deployer.function(f"{PREFIX}-pipeline-reconcile", "pipeline_reconcile", code, env, timeout=120)
    deployer.schedule(reconcile_arn, f"{PREFIX}-reconcile", "rate(5 minutes)")
    api_arn = deployer.function(f"{PREFIX}-api", "app", code, env, timeout=30)
    search_arn = deployer.function("kb_search", "kb_search", code, env, timeout=30)
    api_id = deployer.rest_api(api_arn)
    return {
        "apiId": api_id,
        "apiUrl": f"{endpoint_url.rstrip('/')}/restapis/{api_id}/{STAGE}/_user_request_",
        "stateMachineArn": state_machine_arn,
        "searchFunctionArn": search_arn,
        "triggerFunctionArn": trigger_arn,
        "bucket": bucket,
    }
