"""Where the local embedding model's files are: model.onnx, tokenizer.json and
manifest.json, built offline by infra/build_model.py (`make install`)."""
import json
import os
from functools import lru_cache
from pathlib import Path

MODEL_NAME = "all-MiniLM-L6-v2"
LAYER_DIR = Path("/opt/model") / MODEL_NAME  # a Lambda layer is mounted at /opt
REPO_DIR = Path(__file__).resolve().parents[2] / "build" / "model" / MODEL_NAME


class ModelFilesMissing(RuntimeError):
    pass


def model_dir() -> Path:
    """KB_MODEL_DIR if set, else the Lambda layer's copy, else the repository's build."""
    configured = os.environ.get("KB_MODEL_DIR")
    if configured:
        return Path(configured)
    return LAYER_DIR if LAYER_DIR.is_dir() else REPO_DIR


def model_file(name: str) -> Path:
    path = model_dir() / name
    if not path.is_file():
        raise ModelFilesMissing(
            f"{path} is missing: build the {MODEL_NAME} model with `make install` "
            "(infra/build_model.py), or point KB_MODEL_DIR at a folder that holds it")
    return path


@lru_cache(maxsize=1)
def manifest() -> dict:
    return json.loads(model_file("manifest.json").read_text())
