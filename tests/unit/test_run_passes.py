"""tests/run.py, which `make test` runs: two passes over the same selection, their statuses joined."""
import sys

from tests.run import combined, passes, split_marks


def test_a_marker_expression_of_the_caller_narrows_both_passes():
    shared, last = passes(["tests/e2e", "-m", "not e2e", "-x"], workers=2)
    assert shared[1:] == ["-m", "pytest", "-m", "(not e2e) and not serial", "-n", "2", "--dist", "loadfile",
                          "tests/e2e", "-x"]
    assert last[1:] == ["-m", "pytest", "-m", "(not e2e) and serial", "tests/e2e", "-x"]
    assert shared[0] == last[0] == sys.executable


def test_one_worker_runs_the_first_pass_in_process_and_the_last_m_counts():
    shared, _ = passes(["-mfoo", "-m", "bar"], workers=1)
    assert shared[3:] == ["-m", "(bar) and not serial"]
    assert split_marks(["--maxfail=2", "-k", "x"]) == (["--maxfail=2", "-k", "x"], None)


def test_a_failure_in_either_pass_fails_and_nothing_collected_only_when_neither_ran_a_test():
    assert combined([0, 0]) == 0
    assert combined([0, 5]) == combined([5, 0]) == 0  # a selection with nothing for one pass
    assert combined([5, 5]) == 5
    assert combined([1, 0]) == combined([0, 1]) == combined([5, 1]) == 1
    assert combined([2, 1]) == 2
