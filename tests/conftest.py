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


# Modules of a minute or more, started first: `make test` runs modules on two workers
# (tests/run.py), which end together only when no long module is left for last.
LONG_FIRST = ("tests/e2e/test_bench_harness.py", "tests/e2e/test_real_documents.py",
              "tests/integration/test_filtered_vector_search.py", "tests/unit/test_package.py",
              "tests/e2e/test_examples.py", "tests/integration/test_portable_postgres.py",
              "tests/e2e/test_console.py", "tests/cli/test_commands.py")


def pytest_collection_modifyitems(items):
    rank = {module: i for i, module in enumerate(LONG_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(LONG_FIRST)))
    for item in items:
        if item.nodeid.startswith("tests/unit/"):  # no stack: tests/run.py runs them beside the serial tests
            item.add_marker(pytest.mark.standalone)


@pytest.fixture(scope="session")
def local_env() -> dict:
    return read_local_env()


@pytest.fixture(scope="session")
def shared_docs() -> Path:
    """The real documents kept in the repository (PDF, DOCX, Markdown)."""
    return DATA / "docs"
