"""tests/run.py, which `make test` runs: every run over the same selection, their statuses joined."""
import sys

from _pytest.mark.expression import Expression

from tests.run import Run, combined, command, phases, split_marks


def test_each_test_is_in_exactly_one_run():
    runs = [run for phase in phases(workers=2) for run in phase]
    for serial in (False, True):
        for standalone in (False, True):
            for one_process in (False, True):
                names = {"serial": serial, "standalone": standalone, "one_process": one_process}
                chosen = [r.name for r in runs
                          if Expression.compile(r.marks).evaluate(lambda name, **_: names.get(name, False))]
                assert len(chosen) == 1, (names, chosen)


def test_a_marker_expression_of_the_caller_narrows_every_run():
    shared = Run("shared", "not serial", workers=2)
    assert command(shared, ["tests/e2e", "-m", "not e2e", "-x"]) == [
        sys.executable, "-m", "pytest", "-m", "(not e2e) and (not serial)", "-n", "2", "--dist", "loadfile",
        "tests/e2e", "-x"]
    assert command(Run("serial", "serial"), ["-mfoo", "-m", "bar"])[3:] == ["-m", "(bar) and (serial)"]
    assert split_marks(["--maxfail=2", "-k", "x"]) == (["--maxfail=2", "-k", "x"], None)


def test_a_failure_in_any_run_fails_and_nothing_collected_only_when_no_run_had_a_test():
    assert combined([0, 0, 0, 0]) == 0
    assert combined([5, 0, 5, 5]) == 0  # a selection with nothing for some runs
    assert combined([5, 5, 5, 5]) == 5
    assert combined([1, 0, 0, 0]) == combined([0, 5, 1, 0]) == 1
    assert combined([2, 1]) == 2
