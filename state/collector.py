"""The cyclic garbage collector paused while a batch is folded.

A fold allocates many objects that live no longer than its batch (decoded
events, writes, slices, a forget's scratch state) beside a few that stay
(the view's ids and lists). The collector, run in the middle of a batch,
traverses every one of them alive at that moment, and the survivors again
at each older generation's collection, though none of them is garbage
yet. Paused for the batch, the short-lived ones are freed by their
reference counts as the batch ends, and the collector next runs after it,
on what is left: a cycle the batch let go of waits for that collection,
at most a batch later than it would have (a replay's batch is up to
`COMMIT_EVERY` events).
"""

from __future__ import annotations

import gc
from contextlib import contextmanager
from typing import Iterator


@contextmanager
def collector_paused() -> Iterator[None]:
    """The collector disabled inside, and enabled again after if it was
    before (nested or on two threads: only the one that disabled it
    enables it again, so it is never left off)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
