"""jieba's lexicon (`processors.chinese.Lexicon`), decoded once per machine.

Reading it from jieba takes about 0.9 s of CPU in a process's first Chinese
text: jieba builds its dictionary's prefix table (0.5 s, from its own cache)
and `jieba.analyse` reads its idf table and a part-of-speech table (0.4 s).
A worker paid that inside a batch, on its extraction thread, holding the
interpreter while the event loop folded and answered (about 1.7 s under
load). `install(folder)` makes `processors.chinese` read the lexicon from a
`marshal` file there instead (about 0.1 s), written by the first process
that read it from jieba. The file is named by jieba's version; one that
cannot be read is read from jieba again and rewritten. Nothing changes in
what the lexicon holds (tests/unit/test_chinese_lexicon.py).
"""

from __future__ import annotations

import logging
import marshal
import os
from importlib import metadata
from pathlib import Path
from typing import Callable

from emgas.processors import chinese
from emgas.processors.chinese import Lexicon

log = logging.getLogger(__name__)


def cache_file(folder: Path) -> Path:
    return folder / f"jieba-{metadata.version('jieba')}-lexicon.marshal"


def cached_source(folder: Path, read: Callable[[], Lexicon] = chinese.jieba_lexicon) -> Callable[[], Lexicon]:
    """`read` (jieba's lexicon), kept in and read from `folder`."""

    def source() -> Lexicon:
        path = cache_file(folder)
        try:
            found = _lexicon(marshal.loads(path.read_bytes()))
            if found is not None:
                return found
        except (OSError, ValueError, EOFError, TypeError):
            pass  # absent or unreadable: read from jieba below and written again
        lexicon = read()
        _write(path, marshal.dumps((lexicon.two_char_words, dict(lexicon.idf), lexicon.median_idf)))
        return lexicon

    return source


def install(folder: Path) -> None:
    """`processors.chinese` reads its lexicon through `folder` from now on,
    in this process (before its first Chinese text: one read stays)."""
    chinese.read_lexicon_with(cached_source(folder))


def _lexicon(value: object) -> Lexicon | None:
    """The lexicon a cache file held, or None if it holds something else."""
    if not (isinstance(value, tuple) and len(value) == 3):
        return None
    words, idf, median = value
    if isinstance(words, frozenset) and isinstance(idf, dict) and isinstance(median, float):
        return Lexicon(words, idf, median)
    return None


def _write(path: Path, data: bytes) -> None:
    """Written whole or not at all (another process may read it meanwhile)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f"{path.name}.{os.getpid()}.partial")
        partial.write_bytes(data)
        partial.replace(path)
    except OSError as err:
        log.warning("could not keep jieba's lexicon in %s (%s): read from jieba again next start", path.parent, err)
