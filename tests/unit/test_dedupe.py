"""Near-duplicate passages (chalicelib/retrieval/dedupe.py): the same text or nearly answers once."""
from chalicelib.retrieval import dedupe

OPTION = """--work-tree=<path>
Set the path to the root of the working tree. This can also be controlled by setting the
WORK_TREE environment variable and the core.worktree configuration variable. It can be an
absolute path or a path relative to the current working directory. Note that this option
only takes effect together with the directory option, and that the value is read once when
the command starts, before any configuration file is consulted."""

OTHER = """Memory settings
The server keeps recently read pages in a shared buffer whose size is set at start-up. A larger
buffer holds more of the working set, but leaves less memory for the operating system's own
cache; a quarter of the machine's memory is a common starting point for a dedicated server.
Changing it takes effect only after a restart, and the logs say how much was reserved."""


def _one_line_changed(text: str) -> str:
    lines = text.split("\n")
    lines[2] = "WORK_TREE may name any folder the user can write, even one on another disk, as well."
    return "\n".join(lines)


def test_normalised_drops_case_punctuation_and_whitespace():
    assert dedupe.normalised("  The  Option,\n--work-tree=<PATH>!") == "the option work tree path"
    assert dedupe.normalised("Ünïcode  Wörds") == "ünïcode wörds"


def test_the_same_text_in_another_layout_is_one_answer():
    html = " ".join(OPTION.split()).upper()  # an HTML page's text beside its source: one line, other case
    groups = dedupe.distinct([("a.txt", OPTION), ("b.html", html), ("c.txt", OTHER)], lambda item: item[1])
    assert [g.kept[0] for g in groups] == ["a.txt", "c.txt"]
    assert [r[0] for r in groups[0].repeats] == ["b.html"] and groups[1].repeats == []


def test_a_line_changed_is_still_the_same_answer():
    changed = _one_line_changed(OPTION)
    assert changed != OPTION and dedupe.normalised(changed) != dedupe.normalised(OPTION)
    assert dedupe.jaccard(OPTION, changed) >= dedupe.NEAR_JACCARD
    groups = dedupe.distinct([OTHER, changed, OPTION], str)
    assert [g.kept for g in groups] == [OTHER, changed] and groups[1].repeats == [OPTION]


def test_different_passages_are_all_kept():
    # the same subject in other words is another answer
    third = ("How much memory to give the shared buffer depends on the workload: a server that reads the same"
             " small set of tables benefits little from more, one that scans large tables benefits most."
             " Measure the hit ratio before and after a change; the setting is read at start-up.")
    assert dedupe.jaccard(OTHER, third) < dedupe.NEAR_JACCARD
    groups = dedupe.distinct([OPTION, OTHER, third], str)
    assert len(groups) == 3 and all(g.repeats == [] for g in groups)


def test_a_short_text_contained_in_a_long_one_is_not_its_repeat():
    first_sentence = OPTION.split(". ")[0]
    assert len(dedupe.distinct([OPTION, first_sentence], str)) == 2


def test_limit_stops_at_that_many_answers():
    read = []

    def text_of(item: str) -> str:
        read.append(item)
        return item

    items = [OPTION, OPTION.upper(), OTHER, "A third passage about something else entirely, long enough.", OPTION]
    groups = dedupe.distinct(items, text_of, limit=2)
    assert [g.kept for g in groups] == [OPTION, OTHER] and groups[0].repeats == [OPTION.upper()]
    assert read == items[:3]  # nothing after the second answer is read


def test_empty_and_tiny_texts():
    assert dedupe.jaccard("", "") == 1.0
    assert dedupe.jaccard("a b", "c d") == 0.0
    groups = dedupe.distinct(["", "", "ok"], str)
    assert [g.kept for g in groups] == ["", "ok"] and groups[0].repeats == [""]


def test_short_statements_that_differ_by_a_word_are_different_answers():
    site_a = "The reset code of the cooling pump at site zq41ab is 4417."
    site_b = "The reset code of the cooling pump at site zq99cd is 4417."
    assert dedupe.jaccard(site_a, site_b) >= dedupe.NEAR_JACCARD  # by shingles alone they would repeat
    assert len(dedupe.distinct([site_a, site_b], str)) == 2
    assert len(dedupe.distinct([site_a, site_a.upper()], str)) == 1  # the same words still answer once
