"""The README's figures are the benchmark report's: every number of its figures table is read
back from docs/benchmarks.json (at the precision the README prints), and the table names the
report's date."""
import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HEADING = re.compile(r"From the benchmark report of (20\d\d-\d\d-\d\d)")


def _find(rows: list[dict], **match) -> dict:
    found = [r for r in rows if all(r.get(k) == v for k, v in match.items())]
    assert len(found) == 1, f"docs/benchmarks.json: {len(found)} rows match {match}"
    return found[0]


def expected(figures: dict) -> dict[str, list[float]]:
    """Each row of the README's table, by its first cell: the json values its numbers quote, in order."""
    quality = {r["method"]: r for r in figures["quality"]}
    hybrid = _find(figures["search"], chunks=1_000_000, strategy="hybrid", cache="hit")
    keyword = _find(figures["search"], chunks=1_000_000, strategy="keyword", cache="miss")
    throughput = {r["clients"]: r["perSecond"] for r in figures["throughput"]}
    knee = figures["loadKnee"]
    manuals = figures["manuals"]

    def answered(part: str, within: str = "answerInTop3") -> float:  # the README's percentage
        return 100 * manuals[part][within] / manuals[part]["questions"]

    return {
        "retrieval quality, SciFact, nDCG@10: hybrid / semantic / keyword": [
            quality["ours: hybrid"]["ndcgAt10"], quality["ours: semantic"]["ndcgAt10"],
            quality["ours: keyword"]["ndcgAt10"]],
        "real manuals, answer in the top 3, dev / held out: hybrid; semantic; keyword": [
            answered(f"{strategy}/{part}")
            for strategy in ("hybrid", "semantic", "keyword") for part in ("dev", "heldout")],
        "real manuals, answer in the top 10 (what a reranker reorders), dev / held out: hybrid": [
            answered("hybrid/dev", "answerInTop10"), answered("hybrid/heldout", "answerInTop10")],
        "recall@10, hybrid": [quality["ours: hybrid"]["recallAt10"]],
        "hybrid search at 1M chunks, service-side p50 / p95 (query embedding cached)": [
            hybrid["p50Ms"], hybrid["p95Ms"]],
        "keyword search at 1M chunks, service-side p50 / p95": [keyword["p50Ms"], keyword["p95Ms"]],
        "HNSW recall@10 at 1M chunks, at the service's `ef_search`": [
            _find(figures["hnswRecall"], chunks=1_000_000, service=True)["recallAt10"]],
        "keyword top 10 against exact BM25 at 1M chunks": [
            _find(figures["bm25Agreement"], chunks=1_000_000)["agreementAt10"]],
        "cached searches through API Gateway, 1 / 4 / 16 clients": [throughput[1], throughput[4], throughput[16]],
        "the load knee: clients, searches/s, p95": [knee["clients"], knee["perSecond"], knee["p95Ms"]],
        "a real mixed folder of 300 files through the deployed pipeline": [
            figures["realFolder"]["deployed"]["documentsPerMinute"]],
    }


def report_date() -> str:
    figures = json.loads((ROOT / "docs" / "benchmarks.json").read_text())
    for key in ("date", "producedOn", "produced", "runDate"):
        if isinstance(figures.get(key), str):
            return figures[key][:10]
    report = (ROOT / "docs" / "benchmarks.md").read_text()
    match = re.search(r"Produced by `make bench[^`]*` on (20\d\d-\d\d-\d\d)", report)
    assert match, "docs/benchmarks.md names no date"
    return match.group(1)


def readme_table(text: str) -> tuple[str, dict[str, str]]:
    """(the date the table's heading names, {first cell: second cell}) of the README's figures table."""
    heading = HEADING.search(text)
    assert heading, "the README's figures name the benchmark report and its date"
    rows = {}
    for line in text[heading.end():].splitlines():
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if cells[0] not in ("measure", "---") and not set(cells[0]) <= {"-"}:
                rows[cells[0]] = cells[1]
        elif rows:
            break
    return heading.group(1), rows


def numbers(cell: str) -> list[str]:
    return re.findall(r"(?<![\w.])\d[\d,]*(?:\.\d+)?", cell)  # not the 95 of p95


def mismatches(readme: str, figures: dict, date_of_report: str) -> list[str]:
    date, rows = readme_table(readme)
    wrong = [] if date == date_of_report else [f"the README names the report of {date}; it is of {date_of_report}"]
    wanted = expected(figures)
    wrong += [f"{label!r}: a row without its source in docs/benchmarks.json" for label in set(rows) - set(wanted)]
    wrong += [f"{label!r}: missing from the README" for label in set(wanted) - set(rows)]
    for label in set(rows) & set(wanted):
        quoted = numbers(rows[label])
        if len(quoted) != len(wanted[label]):
            wrong.append(f"{label!r}: {rows[label]!r} quotes {len(quoted)} numbers, not {len(wanted[label])}")
            continue
        for text, value in zip(quoted, wanted[label]):
            places = len(text.split(".")[1]) if "." in text else 0
            if float(text.replace(",", "")) != round(value, places):
                wrong.append(f"{label!r}: the README says {text}, docs/benchmarks.json {value:.{places}f}")
    return wrong


def test_every_figure_in_the_readme_is_the_reports():
    figures = json.loads((ROOT / "docs" / "benchmarks.json").read_text())
    wrong = mismatches((ROOT / "README.md").read_text(), figures, report_date())
    assert not wrong, "\n".join(wrong)


def test_a_figure_or_date_that_differs_is_caught():
    figures = json.loads((ROOT / "docs" / "benchmarks.json").read_text())
    readme = (ROOT / "README.md").read_text()
    _, rows = readme_table(readme)
    for label in ("the load knee: clients, searches/s, p95", "cached searches through API Gateway, 1 / 4 / 16 clients"):
        first = numbers(rows[label])[0]
        other = str(int(first) + 1) if "." not in first else f"{float(first) + 1:.{len(first.split('.')[1])}f}"
        changed = readme.replace(f"| {rows[label]} |", f"| {rows[label].replace(first, other, 1)} |")
        assert changed != readme and mismatches(changed, figures, report_date()), label
    assert mismatches(readme, figures, "2000-01-01")
