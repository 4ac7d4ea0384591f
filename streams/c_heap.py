"""The C heap: what the process keeps of the memory it frees, and what it
gives back to the system (glibc's `mallopt` and `malloc_trim`; where the C
library has neither, musl or macOS, both do nothing)."""

from __future__ import annotations

import ctypes
from functools import lru_cache
from typing import Any, Callable

# glibc's malloc gives a freed block of 128 KiB or more (a commit's write
# batch, the fold's arrays, a long record's bytes) back to the kernel, and
# the next one faults its pages in again: about 22,000 page faults and a
# tenth of a second of system time a fold of 8,000 turns, none once freed
# memory is kept for reuse. Kept up to these sizes (mallopt's parameters).
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
KEPT_FREE_BYTES = 512 * 2**20  # free memory at the heap's top kept, at most
HEAP_BLOCK_BYTES = 256 * 2**20  # blocks up to this size from the heap, not a mapping of their own


def keep_freed_memory() -> bool:
    """Freed memory kept for the process's next allocations rather than
    given back to the kernel as it is freed. False where the C library has
    no `mallopt`."""
    tune = _libc_function("mallopt")
    if tune is None:
        return False
    tune(_M_MMAP_THRESHOLD, HEAP_BLOCK_BYTES)
    tune(_M_TRIM_THRESHOLD, KEPT_FREE_BYTES)
    return True


def return_freed_memory() -> bool:
    """Hand the C heap's free pages back to the system (glibc's `malloc_trim`).
    A released partition's views and RocksDB buffers are freed, but glibc keeps
    freed pages for reuse, so without this a worker's RSS stays at the most
    partitions it ever held (in process: the views of 8,000 turns loaded and
    closed, RSS unchanged; trimmed, 38-66 MiB less). False where the C library
    has no `malloc_trim` (musl, macOS)."""
    trim = _libc_function("malloc_trim")
    if trim is None:
        return False
    trim(0)
    return True


@lru_cache(maxsize=None)
def _libc_function(name: str) -> Callable[..., Any] | None:
    """The C library's function `name` (among the process's own symbols:
    no search for the library, which would run `ldconfig` at every
    command's start), or None where it has none."""
    try:
        return getattr(ctypes.CDLL(None), name, None)
    except (OSError, TypeError):  # no symbols of the process's own to load (Windows)
        return None
