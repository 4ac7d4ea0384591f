"""A lexicon's parse cached on local disk, so that a process after the first
loads it in a fraction of the parse (WordNet, CC-CEDICT).

The cache is marshal, compressed fast, under `$XDG_CACHE_HOME/emgas`
(~/.cache/emgas), in a file named by a hash of the cache format's version,
the Python version (marshal's format is the interpreter's) and a
fingerprint of the source files (their sizes). It is written to a
temporary file and renamed, so processes starting together never read a
half-written one; an unreadable one is parsed again, said in the log.
"""

from __future__ import annotations

import gc
import hashlib
import logging
import marshal
import os
import sys
import zlib
from pathlib import Path
from typing import Any, Callable

log = logging.getLogger(__name__)


def default_dir() -> Path:
    """$XDG_CACHE_HOME/emgas, or ~/.cache/emgas."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "emgas"


def cached(cache_dir: Path, name: str, version: int, fingerprint: object, parse: Callable[[], Any], what: str) -> Any:
    """`parse()`'s result (plain values marshal can write), read from
    `cache_dir` when an earlier parse of the same `version` and
    `fingerprint` left it there, else parsed now and written. `what`
    names the lexicon and its source in the log ("WordNet", "the files")."""
    key = hashlib.sha1(repr((version, sys.version_info[:2], fingerprint)).encode()).hexdigest()[:12]
    path = cache_dir / f"{name}-{key}.marshal.z"
    if path.exists():
        try:
            return _loaded(path.read_bytes())
        except (ValueError, EOFError, TypeError, zlib.error) as err:
            log.warning("the %s cache %s is unreadable (%s): parsing again", what, path, err)
    parsed = parse()
    cache_dir.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_bytes(zlib.compress(marshal.dumps(parsed), 1))
    os.replace(tmp, path)
    return parsed


def _loaded(raw: bytes) -> Any:
    """The cached values, read with the cyclic collector paused, then moved
    out of its reach (`gc.freeze`). A lexicon is millions of lists, dicts
    and strings that hold no cycles and live as long as the process: a
    collection during the load only traverses them (WordNet 0.40 s at a
    worker's collector thresholds, 0.23 s paused), and so would every full
    collection after it (about 0.2 s each, a pause for whatever runs)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        values = marshal.loads(zlib.decompress(raw))
    finally:
        if was_enabled:
            gc.enable()
    gc.freeze()
    return values
