"""A knowledge base's source, as the API reads it (chalicelib/sources.parse_source): what a
deployment on AWS refuses before it calls anything."""
import pytest

from chalicelib.errors import Invalid
from chalicelib.sources import parse_source


@pytest.mark.parametrize("endpoint, why", [
    ("http://storage.example.com", "not an https URL"),
    ("https://127.0.0.1:9000", "inside a network"),
    ("https://169.254.169.254", "inside a network"),
    ("https://[::ffff:10.0.0.1]", "inside a network"),
    ("https://localhost:9000", "inside a network"),
])
def test_an_endpoint_inside_a_network_or_without_tls_is_refused_on_aws(endpoint, why):
    with pytest.raises(Invalid) as err:
        parse_source({"type": "s3", "bucket": "team", "endpointUrl": endpoint,
                      "secretArn": "arn:aws:secretsmanager:eu-west-1:1:secret:kb-sources/org_1/s"}, "org_1", "own",
                     allow_private=False)
    assert err.value.message.startswith("source.endpointUrl:") and why in err.value.message


def test_the_local_stack_may_name_its_own_endpoint_and_a_secret_is_the_organisations():
    local = parse_source({"type": "s3", "bucket": "team", "endpointUrl": "http://127.0.0.1:4566"}, "org_1", "own",
                         allow_private=True)
    assert local.endpoint_url == "http://127.0.0.1:4566"
    arn = "arn:aws:secretsmanager:eu-west-1:123456789012:secret:kb-sources/org_1/minio-AbCdEf"
    assert parse_source({"type": "s3", "bucket": "team", "secretArn": arn}, "org_1", "own", False).secret_arn == arn
    with pytest.raises(Invalid) as err:
        parse_source({"type": "s3", "bucket": "team", "secretArn": arn}, "org_2", "own", False)
    assert "kb-sources/org_2/" in err.value.message
    with pytest.raises(Invalid) as err:
        parse_source({"type": "s3", "bucket": "own"}, "org_1", "own", False)
    assert err.value.message.startswith("source.bucket")


def test_an_endpoint_on_aws_needs_the_stores_own_credentials():
    with pytest.raises(Invalid) as err:
        parse_source({"type": "s3", "bucket": "team", "endpointUrl": "https://storage.example.com"}, "org_1", "own",
                     allow_private=False)
    assert err.value.message.startswith("source.secretArn") and "kb-sources/org_1/" in err.value.message


def test_a_download_stops_at_the_limit_whatever_the_listing_said(tmp_path):
    from chalicelib.sources import FolderFiles, SourceConfig, TooLargeObject

    (tmp_path / "big.txt").write_bytes(b"x" * 101)
    files = FolderFiles(SourceConfig("folder", path=str(tmp_path)))
    assert files.download("big.txt", 101) == b"x" * 101
    with pytest.raises(TooLargeObject):
        files.download("big.txt", 100)
