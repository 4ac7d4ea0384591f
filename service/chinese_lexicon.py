"""jieba's lexicon (`processors.chinese.Lexicon`), decoded once per machine.

Reading it from jieba takes about 0.9 s of CPU in a process's first Chinese
text: jieba builds its dictionary's prefix table (0.5 s, from its own cache)
and `jieba.analyse` reads its idf table and a part-of-speech table (0.4 s).
A worker paid that inside a batch, on its extraction thread, holding the
interpreter while the event loop folded and answered (about 1.7 s under
load). `install(folder)` makes `processors.chinese` read the lexicon from a
parse cache there instead (`service.parse_cache`, about 0.1 s), written by
the first process that read it from jieba and named by jieba's version.
Nothing changes in what the lexicon holds (tests/unit/service/test_chinese_lexicon.py).
"""

from __future__ import annotations

from importlib import metadata
from pathlib import Path
from typing import Callable

from emgas.processors import chinese
from emgas.processors.chinese import Lexicon
from emgas.service import parse_cache

_NAME, _VERSION = "jieba-lexicon", 1


def cache_file(folder: Path) -> Path:
    return parse_cache.cache_path(folder, _NAME, _VERSION, metadata.version("jieba"))


def cached_source(folder: Path, read: Callable[[], Lexicon] = chinese.jieba_lexicon) -> Callable[[], Lexicon]:
    """`read` (jieba's lexicon), kept in and read from `folder`."""

    def parse() -> tuple[frozenset[str], dict[str, float], float]:
        lexicon = read()
        return lexicon.two_char_words, dict(lexicon.idf), lexicon.median_idf

    def source() -> Lexicon:
        words, idf, median = parse_cache.cached(
            folder, _NAME, _VERSION, metadata.version("jieba"), parse, "jieba lexicon", _is_lexicon
        )
        return Lexicon(words, idf, median)

    return source


def install(folder: Path) -> None:
    """`processors.chinese` reads its lexicon through `folder` from now on,
    in this process (before its first Chinese text: one read stays)."""
    chinese.read_lexicon_with(cached_source(folder))


def _is_lexicon(value: object) -> bool:
    """Whether a cache file held the three parts of a lexicon."""
    if not (isinstance(value, tuple) and len(value) == 3):
        return False
    words, idf, median = value
    return isinstance(words, frozenset) and isinstance(idf, dict) and isinstance(median, float)
