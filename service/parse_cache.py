"""A lexicon's parse cached on local disk, so that a process after the first
loads it in a fraction of the parse (WordNet, CC-CEDICT, jieba's lexicon,
simplemma's dictionaries).

The cache is marshal, compressed fast, under `$XDG_CACHE_HOME/emgas`
(~/.cache/emgas) or a folder the caller names, in a file named by a hash of
the cache format's version, the Python version (marshal's format is the
interpreter's) and a fingerprint of the source (its files' sizes, its
package's version). It is written to a temporary file and renamed, so
processes starting together never read a half-written one; an unreadable
one is parsed again, said in the log; a folder that cannot be written
costs a parse at the next start, said in the log, and nothing else.
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


def cache_path(cache_dir: Path, name: str, version: int, fingerprint: object) -> Path:
    """The file that holds `name`'s parse of this format and source."""
    key = hashlib.sha1(repr((version, sys.version_info[:2], fingerprint)).encode()).hexdigest()[:12]
    return cache_dir / f"{name}-{key}.marshal.z"


def cached(
    cache_dir: Path,
    name: str,
    version: int,
    fingerprint: object,
    parse: Callable[[], Any],
    what: str,
    valid: Callable[[Any], bool] = lambda values: True,
) -> Any:
    """`parse()`'s result (plain values marshal can write), read from
    `cache_dir` when an earlier parse of the same `version` and
    `fingerprint` left it there (and `valid` accepts what it left), else
    parsed now and written. `what` names the lexicon and its source in the
    log ("WordNet", "the files")."""
    path = cache_path(cache_dir, name, version, fingerprint)
    if path.exists():
        try:
            values = _loaded(path.read_bytes())
            if valid(values):
                return values
            log.warning("the %s cache %s holds something else: parsing again", what, path)
        except (OSError, ValueError, EOFError, TypeError, zlib.error) as err:
            log.warning("the %s cache %s is unreadable (%s): parsing again", what, path, err)
    parsed = parse()
    _write(path, zlib.compress(marshal.dumps(parsed), 1), what)
    return parsed


def _write(path: Path, data: bytes, what: str) -> None:
    """Written whole or not at all (another process may read it meanwhile)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f"{path.name}.tmp{os.getpid()}")
        partial.write_bytes(data)
        os.replace(partial, path)
    except OSError as err:
        log.warning("could not keep the %s cache in %s (%s): parsed again at the next start", what, path.parent, err)


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
