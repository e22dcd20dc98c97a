"""Carries a stack deployed by the old hand-written boto3 deployer (before the template)
over to the CloudFormation stack, keeping the bucket's objects.

The old deployer created functions, a state machine, a rule and an API with plain calls;
CloudFormation cannot adopt them (same names) nor create a bucket whose name exists. So
the old resources go, the bucket's objects wait in a holding bucket while the stack
creates the documents bucket, and come back afterwards (restore_objects), without events.
"""
import time

from botocore.exceptions import ClientError

OLD_FUNCTIONS = ["kb-service-api", "kb_search", "kb-service-s3-trigger", "kb-service-pipeline-reconcile",
                 "kb-service-pipeline-extract", "kb-service-pipeline-chunk", "kb-service-pipeline-embed",
                 "kb-service-pipeline-store", "kb-service-pipeline-finalize",
                 "kb-service-pipeline-mark-failed"]
HOLDING_SUFFIX = "-carried-over"


def _stack_exists(session, stack: str) -> bool:
    """A stack that is there, and not a first create that failed (deploy.py creates that anew)."""
    try:
        found = session.client("cloudformation").describe_stacks(StackName=stack)["Stacks"]
    except ClientError:
        return False
    return bool(found) and found[0]["StackStatus"] not in ("ROLLBACK_COMPLETE", "CREATE_FAILED")


def _function_exists(lam, name: str) -> bool:
    try:
        lam.get_function(FunctionName=name)
        return True
    except ClientError:
        return False


def remove_hand_made_deployment(session, bucket: str, stack: str = "kb-service") -> bool:
    """True when an old deployment was found and removed (objects held aside)."""
    lam = session.client("lambda")
    if _stack_exists(session, stack) or not _function_exists(lam, "kb-service-api"):
        return False
    print("carrying the hand-made deployment over to the CloudFormation stack")
    for name in OLD_FUNCTIONS:
        if _function_exists(lam, name):
            lam.delete_function(FunctionName=name)
    sfn = session.client("stepfunctions")
    for machine in sfn.list_state_machines()["stateMachines"]:
        if machine["name"] == f"{stack}-ingestion":
            sfn.delete_state_machine(stateMachineArn=machine["stateMachineArn"])
    apigw = session.client("apigateway")
    for api in apigw.get_rest_apis(limit=500)["items"]:
        if api["name"] == stack:
            apigw.delete_rest_api(restApiId=api["id"])
    events = session.client("events")
    try:
        events.remove_targets(Rule=f"{stack}-reconcile", Ids=["1"])
        events.delete_rule(Name=f"{stack}-reconcile")
    except ClientError:
        pass
    _move_objects(session.client("s3"), bucket, bucket + HOLDING_SUFFIX, delete_source_bucket=True)
    return True


def hold_orphaned_bucket(session, bucket: str, stack: str = "kb-service") -> bool:
    """True when the documents bucket is there without its stack, its objects now held aside: an
    emulator killed without saving (out of memory) keeps its S3 data on disk but loses its other
    state, and CloudFormation cannot create a bucket whose name exists."""
    if _stack_exists(session, stack):
        return False
    try:
        session.client("s3").head_bucket(Bucket=bucket)
    except ClientError:
        return False
    print(f"the emulator lost stack {stack} but kept s3://{bucket}: its objects wait aside while the stack is"
          " created again, then come back")
    _move_objects(session.client("s3"), bucket, bucket + HOLDING_SUFFIX, delete_source_bucket=True)
    return True


def _missing_parts(session, stack: str, bucket: str) -> list[str]:
    """The stack's queues, state machines and functions the emulator no longer has, and the
    documents bucket's notifications if they are gone: what an emulator stopped without saving
    loses while CloudFormation's record of the stack survives (an update then changes nothing)."""
    cfn, sqs = session.client("cloudformation"), session.client("sqs")
    sfn, lam, s3 = session.client("stepfunctions"), session.client("lambda"), session.client("s3")
    checks = {
        "AWS::SQS::Queue": lambda r: sqs.get_queue_attributes(QueueUrl=r, AttributeNames=["QueueArn"]),
        "AWS::StepFunctions::StateMachine": lambda r: sfn.describe_state_machine(stateMachineArn=r),
        "AWS::Lambda::Function": lambda r: lam.get_function(FunctionName=r),
    }
    missing = []
    for page in cfn.get_paginator("list_stack_resources").paginate(StackName=stack):
        for resource in page["StackResourceSummaries"]:
            check = checks.get(resource["ResourceType"])
            if check is None or not resource.get("PhysicalResourceId"):
                continue
            try:
                check(resource["PhysicalResourceId"])
            except ClientError:
                missing.append(resource["LogicalResourceId"])
    try:
        notifications = s3.get_bucket_notification_configuration(Bucket=bucket)
        if not any(notifications.get(kind) for kind in ("QueueConfigurations", "LambdaFunctionConfigurations",
                                                          "TopicConfigurations", "EventBridgeConfiguration")):
            missing.append(f"s3://{bucket} notifications")
    except ClientError:
        missing.append(f"s3://{bucket}")
    return missing


def recreate_partial_stack(session, bucket: str, stack: str = "kb-service") -> bool:
    """True when the stack was there with parts missing and is now deleted (its bucket's objects held
    aside), for the deployment to create it whole; the documents' data live in PostgreSQL and stay."""
    if not _stack_exists(session, stack):
        return False
    missing = _missing_parts(session, stack, bucket)
    if not missing:
        return False
    print(f"the emulator lost part of stack {stack} ({', '.join(missing[:4])}{', ...' if len(missing) > 4 else ''}):"
          " creating it again; the bucket's objects wait aside and come back")
    s3 = session.client("s3")
    try:  # no events for what leaves: its documents stay as they are
        s3.put_bucket_notification_configuration(Bucket=bucket, NotificationConfiguration={})
    except ClientError:
        pass
    _move_objects(s3, bucket, bucket + HOLDING_SUFFIX, delete_source_bucket=False)  # the stack deletes it
    cfn = session.client("cloudformation")
    cfn.delete_stack(StackName=stack)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        try:
            status = cfn.describe_stacks(StackName=stack)["Stacks"][0]["StackStatus"]
        except ClientError:
            break
        if status == "DELETE_COMPLETE":
            break
        time.sleep(1)
    try:  # an emulator may keep a stack's bucket past its deletion: the create would find it there
        s3.delete_bucket(Bucket=bucket)
    except ClientError:
        pass
    return True


def restore_objects(session, bucket: str) -> int:
    """Objects held aside go back; returns how many. They go back without events: their documents
    are in PostgreSQL already, and a run the stop cut short is started again by the reconcile
    sweep, while an event for every object would start one run each at once (objects of deleted
    knowledge bases included), more workers than the machine holds."""
    s3 = session.client("s3")
    try:
        s3.head_bucket(Bucket=bucket + HOLDING_SUFFIX)
    except ClientError:
        return 0
    notifications = {k: v for k, v in s3.get_bucket_notification_configuration(Bucket=bucket).items()
                     if k != "ResponseMetadata"}
    s3.put_bucket_notification_configuration(Bucket=bucket, NotificationConfiguration={})
    try:
        return _move_objects(s3, bucket + HOLDING_SUFFIX, bucket, delete_source_bucket=True)
    finally:
        s3.put_bucket_notification_configuration(Bucket=bucket, NotificationConfiguration=notifications)


def _move_objects(s3, source: str, target: str, delete_source_bucket: bool) -> int:
    try:
        s3.head_bucket(Bucket=source)
    except ClientError:
        return 0
    try:
        s3.head_bucket(Bucket=target)
    except ClientError:
        s3.create_bucket(Bucket=target)
    if delete_source_bucket:  # no events for what leaves: its documents stay as they are
        s3.put_bucket_notification_configuration(Bucket=source, NotificationConfiguration={})
    moved = 0
    # Sidecars first: an object's ingestion reads its <key>.metadata.json.
    keys = [o["Key"] for page in s3.get_paginator("list_objects_v2").paginate(Bucket=source)
            for o in page.get("Contents", [])]
    for key in sorted(keys, key=lambda k: not k.endswith(".metadata.json")):
        s3.copy_object(Bucket=target, Key=key, CopySource={"Bucket": source, "Key": key},
                       MetadataDirective="COPY")
        s3.delete_object(Bucket=source, Key=key)
        moved += 1
    if delete_source_bucket:
        s3.delete_bucket(Bucket=source)
    return moved
