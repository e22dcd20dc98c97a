"""What a process sets up once when it starts (app.py, before any request): nothing here
runs on import, so importing the code changes no process it is imported into."""
import ctypes
import ctypes.util


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
