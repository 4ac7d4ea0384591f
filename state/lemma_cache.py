"""The lemmatiser's dictionaries, decoded once per machine.

simplemma ships each language's dictionary front-coded and compressed, and
decodes it in Python on its first use in a process: for English, 181,612
entries in about 0.15 s of CPU. A worker pays that at every start, beside
its catch-up, where it delays a partition taken over (its queries wait for
the lemmatiser). `install(folder)` makes simplemma read each language's
decoded dictionary from a `marshal` file there instead (about 0.04 s),
written by the first process that decoded it. The file is named by
simplemma's version; one that cannot be read is decoded again and
rewritten. Nothing changes in what the lemmatiser returns: the dictionary
is the same mapping (tests/unit/test_lemma_cache.py).
"""

from __future__ import annotations

import logging
import marshal
import os
from importlib import metadata
from pathlib import Path
from typing import Callable

from simplemma.strategies.dictionaries import dictionary_factory

log = logging.getLogger(__name__)

Load = Callable[[str], dict[bytes, bytes]]

_ORIGINAL: Load = dictionary_factory._load_dictionary_from_disk


def cache_file(folder: Path, language: str) -> Path:
    return folder / f"simplemma-{metadata.version('simplemma')}-{language}.marshal"


def cached_loader(folder: Path, decode: Load = _ORIGINAL) -> Load:
    """`decode` (simplemma's loader), read from and written to `folder`."""

    def load(language: str) -> dict[bytes, bytes]:
        path = cache_file(folder, language)
        try:
            found = marshal.loads(path.read_bytes())
            if isinstance(found, dict):
                return found
        except (OSError, ValueError, EOFError, TypeError):
            pass  # absent or unreadable: decoded below and written again
        decoded = decode(language)
        _write(path, marshal.dumps(decoded))
        return decoded

    return load


def install(folder: Path) -> None:
    """simplemma's dictionaries through `folder` from now on, in this process
    (before its first lemma: a dictionary already decoded stays as it is)."""
    dictionary_factory._load_dictionary_from_disk = cached_loader(folder)  # type: ignore[assignment]


def _write(path: Path, data: bytes) -> None:
    """Written whole or not at all (another process may read it meanwhile)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f"{path.name}.{os.getpid()}.partial")
        partial.write_bytes(data)
        partial.replace(path)
    except OSError as err:
        log.warning("could not keep the lemmatiser's dictionary in %s (%s): decoded again next start", path.parent, err)
