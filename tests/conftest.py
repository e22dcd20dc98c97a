import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
# Real documents and the labelled retrieval set the suite and the benchmarks read (tests/data/README.md).
DATA = ROOT / "tests" / "data"
LOCAL_ENV = ROOT / ".kb" / "local.env"


def read_local_env() -> dict:
    if not LOCAL_ENV.exists():
        pytest.fail(f"{LOCAL_ENV} is missing: the local stack is not up (run `make up` or `make test`)")
    from kbcli.config import read_env_file

    return read_env_file(LOCAL_ENV)


@pytest.fixture(scope="session")
def local_env() -> dict:
    return read_local_env()


@pytest.fixture(scope="session")
def shared_docs() -> Path:
    """The real documents kept in the repository (PDF, DOCX, Markdown)."""
    return DATA / "docs"
