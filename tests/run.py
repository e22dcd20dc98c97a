"""`make test`: the suite in two passes, with pytest's arguments given to both.

Most tests share the running stack and spend their time waiting on it (a pipeline run, a
function's worker starting), so two pytest-xdist workers run them, a module at a time each.
Tests marked `serial` run afterwards, in one process: they stop, restart or redeploy part of
the stack or change a function's settings, or (schemathesis' generated tests) do not run
under pytest-xdist. KB_TEST_WORKERS=1 runs the first pass in one process too."""
import os
import subprocess
import sys

NO_TESTS = 5  # pytest's exit status when it collected nothing


def split_marks(args: list[str]) -> tuple[list[str], str | None]:
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


def passes(args: list[str], workers: int) -> list[list[str]]:
    rest, expression = split_marks(args)

    def marks(mine: str) -> list[str]:
        return ["-m", f"({expression}) and {mine}" if expression else mine]

    pytest = [sys.executable, "-m", "pytest"]
    spread = ["-n", str(workers), "--dist", "loadfile"] if workers > 1 else []
    return [pytest + marks("not serial") + spread + rest, pytest + marks("serial") + rest]


def combined(codes: list[int]) -> int:
    """The first failure; NO_TESTS only when neither pass collected a test."""
    failures = [c for c in codes if c not in (0, NO_TESTS)]
    if failures:
        return failures[0]
    return NO_TESTS if all(c == NO_TESTS for c in codes) else 0


def main(args: list[str]) -> int:
    workers = int(os.environ.get("KB_TEST_WORKERS", "2"))
    codes = []
    for command in passes(args, workers):
        print("+", " ".join(command[1:]), flush=True)
        codes.append(subprocess.call(command))
    return combined(codes)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
