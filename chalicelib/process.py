"""What a process sets up once when it starts: app.py and each module of Lambda entry points
(a blueprint's event handlers, which Lambda imports by themselves) call start(). Nothing else
here runs on import, so importing the code (tests, the CLI, benchmarks) changes no process."""
import ctypes
import ctypes.util
import logging

from aws_lambda_powertools import Logger
from aws_lambda_powertools.logging.utils import copy_config_to_registered_loggers

# One JSON line per message; the pipeline's steps add the document and run it is about.
LOGGER = Logger(service="kb-service")
_tuned = False


def start() -> None:
    """Called after the entry point's imports: every chalicelib logger imported so far logs
    JSON lines through LOGGER, so a line logged during a step (a provider's retry, a dropped
    connection) names its document and run; and, once a process, freed memory is kept for
    numpy."""
    global _tuned
    logging.getLogger("chalicelib").setLevel(logging.INFO)
    copy_config_to_registered_loggers(source_logger=LOGGER, include={"chalicelib"})
    if not _tuned:
        _tuned = True
        keep_freed_memory()


def keep_freed_memory() -> None:
    """glibc hands each array over 128 kB its own fresh pages (mmap) and returns them when it
    is freed, so every pass numpy makes over a question's postings (retrieval/bm25.py) paid a
    page fault a 4 kB page. Arrays up to 32 MB are taken from the heap instead, and up to
    256 MB freed is kept for the process (the API function has 2 GB). A no-op where the C
    library is not glibc."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        # M_MMAP_THRESHOLD, M_TRIM_THRESHOLD, M_TOP_PAD
        for option, value in ((-3, 32 << 20), (-1, 256 << 20), (-2, 64 << 20)):
            libc.mallopt(option, value)
    except (OSError, AttributeError):
        pass
