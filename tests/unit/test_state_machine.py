"""The ingestion state machine's retry policy, read the way Step Functions reads it:
for an error name, the first retrier whose ErrorEquals names it (or States.ALL)."""
import json
from dataclasses import fields
from pathlib import Path

import pytest

from chalicelib.errors import Transient
from chalicelib.ingestion.model import BatchInput, BatchItem, RunState, WorkFiles
from chalicelib.validate import camel_case

ASL = json.loads((Path(__file__).resolve().parents[2] / "infra" / "ingestion.asl.json").read_text())
TASKS = {name: state for name, state in ASL["States"].items() if state["Type"] == "Task"}
TASKS["EmbedBatch"] = ASL["States"]["Embed"]["ItemProcessor"]["States"]["EmbedBatch"]
WORK_STEPS = ("Extract", "Chunk", "EmbedBatch", "Store", "Finalize")


def retrier(state: dict, error: str):
    return next((r for r in state.get("Retry", [])
                 if error in r["ErrorEquals"] or "States.ALL" in r["ErrorEquals"]), None)


@pytest.mark.parametrize("step", WORK_STEPS)
def test_a_transient_fault_is_retried_with_backoff(step):
    rule = retrier(TASKS[step], Transient.__name__)
    assert rule is not None and rule["MaxAttempts"] >= 3 and rule["BackoffRate"] > 1


@pytest.mark.parametrize("step", WORK_STEPS)
@pytest.mark.parametrize("error", ["KeyError", "TypeError", "IngestionError", "Invalid"])
def test_a_defect_is_not_retried_but_marks_the_document_failed(step, error):
    """Retrying a bug only delays the FAILED status by the backoff."""
    assert retrier(TASKS[step], error) is None
    catch = TASKS[step].get("Catch") or ASL["States"]["Embed"]["Catch"]
    assert catch[0]["ErrorEquals"] == ["States.ALL"] and catch[0]["Next"] == "MarkFailed"


@pytest.mark.parametrize("step", WORK_STEPS)
def test_lambda_service_errors_and_throttles_are_retried(step):
    for error in ("Lambda.ServiceException", "Lambda.TooManyRequestsException", "Sandbox.Timedout", "Runtime.ExitError"):
        assert retrier(TASKS[step], error) is not None, error


@pytest.mark.parametrize("step", WORK_STEPS)
@pytest.mark.parametrize("error", ["Lambda.TooManyRequestsException", "Lambda.Unknown"])
def test_a_throttled_step_waits_its_turn_for_minutes_not_seconds(step, error):
    """Every step has a reserved concurrency, so a burst of files is throttled by design:
    ingestion must not fail for capacity alone (the emulator names a throttle Lambda.Unknown).
    The wait stays short: ministack ignores MaxDelaySeconds and jitter, and an exponential
    backoff left the last file of a burst of 100 waiting a minute after the rest were done."""
    rule = retrier(TASKS[step], error)
    waits = [min(rule["IntervalSeconds"] * rule["BackoffRate"] ** i, rule.get("MaxDelaySeconds", 1e9))
             for i in range(rule["MaxAttempts"])]
    # Full jitter waits half the delay on average on AWS: minutes of patience either way.
    assert sum(waits) / 2 >= 120 and rule["IntervalSeconds"] * rule["BackoffRate"] ** rule["MaxAttempts"] <= 8, rule


def test_mark_failed_retries_whatever_happens():
    assert retrier(ASL["States"]["MarkFailed"], "KeyError")["MaxAttempts"] >= 3


def _paths(node) -> set[str]:
    """Every "$.name" the definition reads."""
    found = set()
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("Variable", "ItemsPath") or key.endswith(".$"):
                if isinstance(value, str) and value.startswith("$."):
                    found.add(value[2:].split(".")[0])
            found |= _paths(value)
    elif isinstance(node, list):
        for item in node:
            found |= _paths(item)
    return found


def test_the_definition_reads_only_fields_the_run_state_has():
    run_fields = {camel_case(f.name) for f in fields(RunState)} - {"extra"}
    assert _paths(ASL) <= run_fields
    assert "manifestKey" in _paths(ASL["States"]["Embed"]["ItemReader"])


def test_each_embed_child_gets_a_batch_input_from_its_manifest_item():
    """The Map's ItemSelector builds exactly a BatchInput: the run's fields from the state, the
    batch from the manifest item that the Chunk step wrote (BatchItem)."""
    selector = ASL["States"]["Embed"]["ItemSelector"]
    assert {k[:-2] for k in selector} == {camel_case(f.name) for f in fields(BatchInput)}
    item = BatchItem(3).to_json()
    assert selector["batch.$"] == "$$.Map.Item.Value." + next(iter(item))


def test_the_embed_map_is_distributed_and_reads_its_items_from_s3():
    """An inline Map's items and results travel in the state (256 KiB) and its iterations'
    events count toward the execution's 25,000: a document of many batches needs the
    distributed Map, its items in the manifest, its children's answers left out of the state."""
    embed = ASL["States"]["Embed"]
    assert embed["ItemProcessor"]["ProcessorConfig"] == {"Mode": "DISTRIBUTED", "ExecutionType": "STANDARD"}
    assert "ItemsPath" not in embed and embed["ItemReader"]["ReaderConfig"] == {"InputType": "JSON"}
    assert embed["ItemReader"]["Parameters"] == {"Bucket.$": "$.bucket", "Key.$": "$.manifestKey"}
    assert embed["ResultPath"] is None


def test_a_run_names_every_work_file_in_one_place():
    work = WorkFiles.of("_pipeline/", "doc_1", "run_1")
    keys = [work.extracted, work.manifest, work.chunks(0), work.chunks(12), work.embedded(12)]
    assert all(k.startswith("_pipeline/doc_1/run_1/") for k in keys) and len(set(keys)) == len(keys)
    assert work.chunks(12) != work.embedded(12) and work.embedded(12).endswith("-00012.json")


def test_run_state_round_trips_and_keeps_what_a_catch_adds():
    event = {"documentId": "doc_1", "kbId": "kb_1", "bucket": "b", "key": "kb/kb_1/a.txt", "runId": "r1",
             "outcome": "CHUNKED", "manifestKey": "x", "batchCount": 2, "error": {"Error": "E", "Cause": "c"},
             "custom": 1}
    assert RunState.from_json(event).to_json() == event


def test_a_50_mb_text_file_fits_the_chunk_limit_even_at_the_local_model_s_chunks():
    """The distributed Map lifts the inline Map's bound on batches: the limit is raised so a
    50 MB text file (about 4 characters a token) is one document at the default chunking."""
    from chalicelib import limits
    from chalicelib.config import load_settings
    from chalicelib.ingestion.context import fitting_overlap, fitting_tokens

    settings = load_settings()
    kb = {"chunk_tokens": settings.default_chunk_tokens, "chunk_overlap": settings.default_chunk_overlap,
          "embedding_provider": "local"}
    chunks = (50_000_000 // 4) // (fitting_tokens(kb) - fitting_overlap(kb))
    assert 70_000 < chunks <= limits.MAX_CHUNKS_PER_DOCUMENT
