"""checkov, run as tests/unit/test_package.py runs it (with .venv-checkov's Python): the same checks
and output, in a third of the time.

bc-jsonpath-ng, which checkov uses to render a template's references, builds PLY's LALR tables
again for every JSONPath it parses (about 0.07 s of CPU each, 267 times for our template:
two thirds of checkov's run). Here the tables are built once per parser class and thread, then
reused; PLY's rules in that parser keep no state of their own."""
import sys
import threading
import warnings

import ply.yacc

_build = ply.yacc.yacc
_built = threading.local()


def _yacc(*, module, start, tabmodule, debug, **options):
    parsers = _built.__dict__.setdefault("parsers", {})
    key = (type(module), start, tabmodule, debug)
    if key not in parsers:
        parsers[key] = _build(module=module, start=start, tabmodule=tabmodule, debug=debug, **options)
    return parsers[key]


ply.yacc.yacc = _yacc

from checkov.main import Checkov  # noqa: E402  (after the patch: it imports the parser)

if __name__ == "__main__":
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", category=SyntaxWarning)
        sys.exit(Checkov().run())
