"""`make up` on an emulator that kept CloudFormation's record of the stack but lost some of its
resources (an emulator stopped without saving): an update changes nothing, so the stack is
found wanting and created again, and the bucket's objects come back without an event each."""
import json

import boto3
import pytest
from moto import mock_aws

from localstack import legacy

BUCKET, STACK = "kb-documents-test", "kb-test"
TEMPLATE = {"Resources": {
    "Events": {"Type": "AWS::SQS::Queue", "Properties": {"QueueName": "kb-test-events"}},
    "Documents": {"Type": "AWS::S3::Bucket", "Properties": {"BucketName": BUCKET}},
}}


@pytest.fixture
def session(monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test")
    with mock_aws():
        session = boto3.Session(region_name="us-east-1")
        session.client("cloudformation").create_stack(StackName=STACK, TemplateBody=json.dumps(TEMPLATE))
        queue_arn = session.client("sqs").get_queue_attributes(
            QueueUrl=session.client("sqs").get_queue_url(QueueName="kb-test-events")["QueueUrl"],
            AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        session.client("s3").put_bucket_notification_configuration(Bucket=BUCKET, NotificationConfiguration={
            "QueueConfigurations": [{"QueueArn": queue_arn, "Events": ["s3:ObjectCreated:*"]}]})
        yield session


def test_a_whole_stack_is_left_as_it_is(session):
    assert legacy._missing_parts(session, STACK, BUCKET) == []
    assert legacy.recreate_partial_stack(session, BUCKET, STACK) is False


def test_a_lost_queue_and_lost_notifications_are_named(session):
    sqs, s3 = session.client("sqs"), session.client("s3")
    sqs.delete_queue(QueueUrl=sqs.get_queue_url(QueueName="kb-test-events")["QueueUrl"])
    s3.put_bucket_notification_configuration(Bucket=BUCKET, NotificationConfiguration={})

    assert legacy._missing_parts(session, STACK, BUCKET) == ["Events", f"s3://{BUCKET} notifications"]


def test_a_stack_found_wanting_goes_with_its_objects_aside(session):
    s3 = session.client("s3")
    s3.put_object(Bucket=BUCKET, Key="kb/kb_1/a.md", Body=b"# A")
    s3.put_bucket_notification_configuration(Bucket=BUCKET, NotificationConfiguration={})

    assert legacy.recreate_partial_stack(session, BUCKET, STACK) is True
    assert session.client("cloudformation").list_stacks(StackStatusFilter=["CREATE_COMPLETE"])["StackSummaries"] == []
    held = s3.list_objects_v2(Bucket=BUCKET + legacy.HOLDING_SUFFIX)["Contents"]
    assert [o["Key"] for o in held] == ["kb/kb_1/a.md"]


def test_objects_come_back_with_the_bucket_notifications_kept(session):
    s3 = session.client("s3")
    s3.create_bucket(Bucket=BUCKET + legacy.HOLDING_SUFFIX)
    s3.put_object(Bucket=BUCKET + legacy.HOLDING_SUFFIX, Key="kb/kb_1/b.md", Body=b"# B")
    before = s3.get_bucket_notification_configuration(Bucket=BUCKET)["QueueConfigurations"]

    assert legacy.restore_objects(session, BUCKET) == 1
    assert s3.get_object(Bucket=BUCKET, Key="kb/kb_1/b.md")["Body"].read() == b"# B"
    assert s3.get_bucket_notification_configuration(Bucket=BUCKET)["QueueConfigurations"] == before
