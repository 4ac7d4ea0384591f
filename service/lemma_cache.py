"""The lemmatiser's dictionaries, decoded once per machine.

simplemma ships each language's dictionary front-coded and compressed, and
decodes it in Python on its first use in a process: for English, 181,612
entries in about 0.15 s of CPU. A worker pays that at every start, beside
its catch-up, where it delays a partition taken over (its queries wait for
the lemmatiser). `install(folder)` makes simplemma read each language's
decoded dictionary from a parse cache there instead (`service.parse_cache`),
written by the first process that decoded it and named by simplemma's
version. Nothing changes in what the lemmatiser returns: the dictionary is
the same mapping (tests/unit/service/test_lemma_cache.py).
"""

from __future__ import annotations

from importlib import metadata
from pathlib import Path
from typing import Callable, cast

from emgas.service import parse_cache

Load = Callable[[str], dict[bytes, bytes]]

_VERSION = 1


def cache_file(folder: Path, language: str) -> Path:
    return parse_cache.cache_path(folder, f"simplemma-{language}", _VERSION, metadata.version("simplemma"))


def cached_loader(folder: Path, decode: Load | None = None) -> Load:
    """`decode` (simplemma's loader by default), read from and written to `folder`."""
    original = _simplemma_loader() if decode is None else decode

    def load(language: str) -> dict[bytes, bytes]:
        fingerprint = metadata.version("simplemma")
        parse = lambda: original(language)  # noqa: E731
        found: dict[bytes, bytes] = parse_cache.cached(
            folder, f"simplemma-{language}", _VERSION, fingerprint, parse, "lemmatiser dictionary", _is_dict
        )
        return found

    return load


def install(folder: Path) -> None:
    """simplemma's dictionaries through `folder` from now on, in this process
    (before its first lemma: a dictionary already decoded stays as it is)."""
    from simplemma.strategies.dictionaries import dictionary_factory

    dictionary_factory._load_dictionary_from_disk = cached_loader(folder, _simplemma_loader())  # type: ignore[assignment]


_original: Load | None = None


def _simplemma_loader() -> Load:
    """simplemma's own loader (taken before `install` replaces it; imported
    here, not with this module: simplemma's import costs a worker's start
    about 50 ms, which its warm-up thread pays instead)."""
    global _original
    if _original is None:
        from simplemma.strategies.dictionaries import dictionary_factory

        _original = cast(Load, dictionary_factory._load_dictionary_from_disk)
    return _original


def _is_dict(value: object) -> bool:
    return isinstance(value, dict)
