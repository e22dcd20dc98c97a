"""`make test`: the suite in two phases, with pytest's arguments given to every run.

Most tests share the running stack and spend their time waiting on it (a pipeline run, a
function's worker starting), so two pytest-xdist workers run them, a module at a time each;
schemathesis' generated tests (marked `one_process`: they check nothing under pytest-xdist)
run beside them in a process of their own. Then the tests marked `serial`, which stop,
restart or redeploy part of the stack, change a function's settings or lock what every test
uses, run in one process, and beside them the unit tests (`standalone`: tests/unit, which
need no stack).
KB_TEST_WORKERS=1 runs the shared tests in one process too."""
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from typing import Optional

NO_TESTS = 5  # pytest's exit status when it collected nothing


@dataclass(frozen=True)
class Run:
    name: str
    marks: str
    workers: int = 1
    beside: bool = False  # runs while its phase's first run does; its output is shown after it


def phases(workers: int) -> list[list[Run]]:
    return [[Run("shared", "not serial and not standalone and not one_process", workers),
             Run("one process", "one_process and not serial and not standalone", beside=True)],
            [Run("serial", "serial"),
             Run("standalone", "standalone and not serial", beside=True)]]


def split_marks(args: list[str]) -> tuple[list[str], Optional[str]]:
    """The arguments less any `-m EXPR`, and that expression (the last one, as pytest reads it)."""
    rest, expression, words = [], None, iter(args)
    for word in words:
        if word == "-m":
            expression = next(words, None)
        elif word.startswith("-m") and not word.startswith("--"):
            expression = word[2:]
        else:
            rest.append(word)
    return rest, expression


def command(run: Run, args: list[str]) -> list[str]:
    rest, expression = split_marks(args)
    marks = f"({expression}) and ({run.marks})" if expression else run.marks
    spread = ["-n", str(run.workers), "--dist", "loadfile"] if run.workers > 1 else []
    return [sys.executable, "-m", "pytest", "-m", marks, *spread, *rest]


def combined(codes: list[int]) -> int:
    """The first failure; NO_TESTS only when no run collected a test."""
    failures = [c for c in codes if c not in (0, NO_TESTS)]
    if failures:
        return failures[0]
    return NO_TESTS if all(c == NO_TESTS for c in codes) else 0


def run_phase(runs: list[Run], args: list[str]) -> list[int]:
    """The phase's first run with its output as it comes; the others at the same time, each
    shown once it has ended."""
    started = []
    for run in runs:
        print(f"+ [{run.name}] pytest", " ".join(command(run, args)[3:]), flush=True)
        log = tempfile.TemporaryFile(mode="w+") if run.beside else None
        started.append((run, log, subprocess.Popen(command(run, args), stdout=log, stderr=log)))
    codes = []
    for run, log, process in started:
        codes.append(process.wait())
        if log is not None:
            log.seek(0)
            print(f"\n+ [{run.name}] ended with status {codes[-1]}:", flush=True)
            sys.stdout.write(log.read())
            sys.stdout.flush()
            log.close()
    return codes


def main(args: list[str]) -> int:
    workers = int(os.environ.get("KB_TEST_WORKERS", "2"))
    codes = []
    for runs in phases(workers):
        codes += run_phase(runs, args)
    return combined(codes)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
