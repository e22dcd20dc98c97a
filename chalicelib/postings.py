"""BM25's postings as numpy arrays and the bytes they travel in: the packed blocks of
term_blocks as SQL joins them (migration 0027's layout, and 0026's before a repack), the
compact form workers share through Redis, and the merges a read needs (several knowledge
bases' blocks, the tail's changes). No SQL and no I/O: storage/ reads and writes the bytes,
retrieval/bm25.py scores what they hold."""
import struct
from dataclasses import dataclass
from typing import Optional

import numpy as np


@dataclass(frozen=True)
class Postings:
    """A term's postings: chunk ids ascending, with each one's term frequency and length."""
    ids: np.ndarray
    tfs: np.ndarray
    dls: np.ndarray


@dataclass(frozen=True)
class Directory:
    """A term's blocks, by range: first and last chunk id, and the highest frequency and
    shortest chunk in each (its bound); ordered by first id."""
    first: np.ndarray
    last: np.ndarray
    max_tf: np.ndarray
    min_dl: np.ndarray


EMPTY = (np.empty(0, dtype=np.int64), np.empty(0), np.empty(0))
NO_BLOCKS = Directory(*(np.empty(0),) * 4)

# Per block (the layout column storage/term_blocks.py joins): postings, then the bytes an id
# step, a frequency and a length take.
LAYOUT = np.dtype([("n", ">i2"), ("id", ">i2"), ("tf", ">i2"), ("dl", ">i2")])


def _values(data: bytes, counts: np.ndarray, widths: np.ndarray, dtype=np.int64) -> np.ndarray:
    """Big-endian unsigned values, each block's `counts` of them in its own width in bytes."""
    if len(widths) and (widths == widths[0]).all():  # the common case: one width throughout
        width = int(widths[0])
        return np.frombuffer(data, dtype=">i8" if width == 8 else f">u{width}").astype(dtype)
    # Every value's first byte, then its next ones for the values that have them, by index:
    # most blocks' values take one width and a few another, so this touches only the values
    # that need a next byte (cheaper than np.where over every value or a boolean mask).
    raw = np.frombuffer(data + bytes(8), dtype=np.uint8)
    each = np.repeat(widths.astype(np.int64), counts)
    at = np.cumsum(each) - each
    out = raw[at].astype(np.int64)
    for byte in range(1, int(widths.max(initial=0))):
        wide = np.flatnonzero(each > byte)
        out[wide] = (out[wide] << 8) | raw[at[wide] + byte]
    return out.astype(dtype, copy=False)


def unpacked(firsts: bytes, layout: bytes, ids: bytes, tfs: bytes, dls: bytes) -> Postings:
    """Blocks joined by _JOINED (one knowledge base's, in id order) as postings."""
    first = np.frombuffer(firsts, dtype=">i8").astype(np.int64)
    blocks = np.frombuffer(layout, dtype=LAYOUT)
    counts = blocks["n"].astype(np.int64)
    starts = np.cumsum(counts) - counts  # a block's first step is 0: its id is first_id
    whole = blocks["id"] == 0  # 0026's layout, not yet repacked (0028): each id whole, in 8 bytes
    values = _values(ids, counts, np.where(whole, 8, blocks["id"]))
    if whole.any():
        stepped = np.diff(values, prepend=0)
        stepped[starts] = 0
        values = np.where(np.repeat(whole, counts), stepped, values)
    steps = np.cumsum(values)
    return Postings(np.repeat(first - steps[starts], counts) + steps,
                    _values(tfs, counts, blocks["tf"], np.float64), _values(dls, counts, blocks["dl"], np.float64))


def widened(p: Postings) -> Postings:
    """Kept postings as bm25 reads them: frequencies and lengths in float64."""
    return Postings(p.ids, p.tfs.astype(np.float64), p.dls.astype(np.float64))


def narrowest(values: np.ndarray) -> np.ndarray:
    """Whole numbers (frequencies, lengths) in the fewest bytes that hold them."""
    return values.astype(narrowest_type(values))


def narrowest_type(values: np.ndarray) -> np.dtype:
    top = float(values.max()) if len(values) else 0.0
    return np.dtype(next((d for d in (np.uint8, np.uint16, np.uint32) if top <= np.iinfo(d).max), np.float64))


# A term's postings as shared: first id, count and the three arrays' dtypes, then the ids as
# steps from the one before (2 bytes each where every step fits), frequencies and lengths in
# their fewest bytes, little-endian: ~5 bytes a posting, read back as views but for the ids.
SHARED_HEAD = struct.Struct("<qq3s3s3s")


def to_shared(p: Postings) -> memoryview:
    """Written straight into one buffer, rather than joining each array's bytes (a copy more)."""
    n, first = len(p.ids), int(p.ids[0]) if len(p.ids) else 0
    steps = np.diff(p.ids)
    top = int(steps.max(initial=0))
    dtypes = [np.dtype("<u2" if top < 1 << 16 else "<u4" if top < 1 << 32 else "<i8"),
              *(narrowest_type(a).newbyteorder("<") for a in (p.tfs, p.dls))]
    out = bytearray(SHARED_HEAD.size + n * sum(d.itemsize for d in dtypes))
    SHARED_HEAD.pack_into(out, 0, first, n, *(d.str.encode() for d in dtypes))
    at = SHARED_HEAD.size
    for dtype, values in zip(dtypes, (steps, p.tfs, p.dls)):
        view = np.frombuffer(out, dtype, n, at)
        if values is steps:
            view[:1] = 0  # the first id is the head's
            view[1:] = values
        else:
            view[:] = values
        at += view.nbytes
    return memoryview(out)


def from_shared(data: bytes) -> Postings:
    """Postings as to_shared wrote them (narrow, as CACHE keeps them); ValueError if they
    are not whole."""
    first, n, *dtypes = SHARED_HEAD.unpack_from(data)
    arrays, at = [], SHARED_HEAD.size
    for dtype in dtypes:
        arrays.append(np.frombuffer(data, np.dtype(dtype.decode()), n, at))
        at += arrays[-1].nbytes
    if at != len(data):
        raise ValueError(f"{len(data) - at} bytes left over")
    ids = np.cumsum(arrays[0], dtype=np.int64)
    ids += first
    return Postings(ids, arrays[1], arrays[2])


def directory_to_shared(d: Directory) -> bytes:
    return b"".join((struct.pack("<q", len(d.first)), d.first.astype("<i8").tobytes(), d.last.astype("<i8").tobytes(),
                     d.max_tf.astype("<f4").tobytes(), d.min_dl.astype("<f4").tobytes()))


def directory_from_shared(data: bytes) -> Directory:
    (n,) = struct.unpack_from("<q", data)
    if len(data) != 8 + 24 * n:
        raise ValueError(f"{len(data)} bytes for {n} blocks")
    first, last = (np.frombuffer(data, "<i8", n, 8 + 8 * n * i).astype(np.int64) for i in (0, 1))
    max_tf, min_dl = (np.frombuffer(data, "<f4", n, 8 + 16 * n + 4 * n * i).astype(np.float64) for i in (0, 1))
    return Directory(first, last, max_tf, min_dl)


def merged(parts: list[Directory]) -> Optional[Directory]:
    """Knowledge bases' directories of a term as one, ordered by first id; None if none has a block."""
    parts = [d for d in parts if len(d.first)]
    if len(parts) <= 1:
        return parts[0] if parts else None
    joined = Directory(*(np.concatenate(c) for c in zip(*((d.first, d.last, d.max_tf, d.min_dl) for d in parts))))
    order = np.argsort(joined.first, kind="stable")
    return Directory(joined.first[order], joined.last[order], joined.max_tf[order], joined.min_dl[order])


def inside(p: Postings, d: Directory, starts: np.ndarray) -> Postings:
    """p's postings inside the blocks of d that start at these ids."""
    at = np.searchsorted(d.first, starts)
    at = np.unique(at[(at < len(d.first)) & (d.first[np.minimum(at, len(d.first) - 1)] == starts)])
    low, high = np.searchsorted(p.ids, d.first[at]), np.searchsorted(p.ids, d.last[at], side="right")
    n = np.maximum(high - low, 0)
    take = np.repeat(low - (np.cumsum(n) - n), n) + np.arange(int(n.sum()))
    if len(low) > 1 and np.any(low[1:] < np.maximum.accumulate(high)[:-1]):  # several knowledge bases' ranges overlap
        take = np.unique(take)
    return Postings(p.ids[take], p.tfs[take], p.dls[take])


def apply_tail(p: Postings, changes: list[dict]) -> Postings:
    """The blocks' postings less those the tail voids, plus its new ones (both by chunk id)."""
    voided = np.fromiter((r["chunk_id"] for r in changes if r["sign"] < 0), dtype=np.int64)
    added = [r for r in changes if r["sign"] > 0]
    ids, tfs, dls = p.ids, p.tfs, p.dls
    if len(voided) and len(ids):
        at = np.searchsorted(ids, voided)
        inside = at < len(ids)
        at, voided = at[inside], voided[inside]
        gone = at[ids[at] == voided]
        keep = np.ones(len(ids), dtype=bool)
        keep[gone] = False
        ids, tfs, dls = ids[keep], tfs[keep], dls[keep]
    if added:
        new_ids = np.fromiter((r["chunk_id"] for r in added), dtype=np.int64, count=len(added))
        at = np.searchsorted(ids, new_ids)
        ids = np.insert(ids, at, new_ids)
        tfs = np.insert(tfs, at, np.fromiter((r["tf"] for r in added), dtype=np.float64, count=len(added)))
        dls = np.insert(dls, at, np.fromiter((r["dl"] for r in added), dtype=np.float64, count=len(added)))
    return Postings(ids, tfs, dls)
