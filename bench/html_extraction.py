"""HTML extraction time per page (trafilatura, chalicelib/ingestion/formats/html.py) on
the Debian HTML manuals of this machine, and how often the plain parser takes over.

    .venv/bin/python bench/html_extraction.py [ROOT ...]   (default /usr/share/doc)
"""
import glob
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from trafilatura.utils import load_html  # noqa: E402

from chalicelib.ingestion.formats import html  # noqa: E402


def main(roots: list[str]) -> None:
    files = sorted(f for root in roots for f in glob.glob(f"{root}/**/*.htm*", recursive=True)
             if os.path.isfile(f) and f.endswith((".html", ".htm")))
    html.read_html(b"<html><body><p>warm-up: trafilatura's import</p></body></html>")
    rows, fallbacks, empty = [], 0, 0
    for path in files:
        raw = Path(path).read_bytes()
        started = time.perf_counter()
        empty += html.read_html(raw).note is not None  # navigation and headings only
        rows.append(((time.perf_counter() - started) * 1000, len(raw), path))
        tree = load_html(html._CGI_HEADER.sub(b"", raw, count=1))
        html._prune_navigation(tree)
        fallbacks += html._main_content(tree) is None
    times = sorted(r[0] for r in rows)
    total_mb = sum(r[1] for r in rows) / 1e6
    print(f"{len(rows)} pages, {total_mb:.1f} MB: median {statistics.median(times):.1f} ms, "
          f"p95 {times[int(0.95 * (len(times) - 1))]:.1f} ms, max {times[-1]:.0f} ms, "
          f"{sum(times) / 1000 / total_mb:.2f} s/MB; plain parser for {fallbacks}, navigation only {empty}")
    for ms, size, path in sorted(rows)[-3:]:
        print(f"  {ms:8.0f} ms  {size / 1e6:5.2f} MB  {path}")


if __name__ == "__main__":
    main(sys.argv[1:] or ["/usr/share/doc"])
