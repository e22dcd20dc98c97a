"""The ingestion benchmark's harness runs (quick mode); its figures are not judged here."""
import re
import subprocess
import sys

from tests.conftest import ROOT


def test_ingestion_benchmark_quick_mode_prints_its_figures():
    out = subprocess.run([sys.executable, str(ROOT / "bench" / "ingestion.py"), "--quick"],
                         capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
    for label in ("pages/s", "chunks/s", "documents/min"):
        assert re.search(r"\d+\.\d+ " + re.escape(label), out.stdout), out.stdout
    assert "(3/3 abstracts" in out.stdout
