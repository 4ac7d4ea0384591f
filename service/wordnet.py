"""WordNet 3.0 (Princeton) read from its database files, for query expansion.

The files come from Debian's `wordnet-base` (`make wordnet`, or `apt-get
install wordnet-base`: /usr/share/wordnet) or any WNDB directory the entry
point names with `use_directory` (the `wordnet_dir` setting, EMGAS_WORDNET_DIR). Only what `processors.expansion` reads is kept: each
synset's lemmas and its hypernym, hyponym and derivation pointers, the
index (lemma -> synsets, most frequent sense first) and the exception
lists of morphology. Parsing takes about 3 s; the result is kept under the
cache directory in an SQLite file read on demand (`service.wordnet_db`):
opening it takes a millisecond, and a process holds the synsets and lemmas
its queries read, not the whole parse (about 140 MB, 0.23 s to load).

Licence: WordNet 3.0 licence (permissive; /usr/share/doc/wordnet-base/copyright).
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable

from emgas.service import parse_cache, wordnet_db

log = logging.getLogger(__name__)

_POS_FILES = {"n": "noun", "v": "verb", "a": "adj", "r": "adv"}
# An instance's hypernym (Oslo -> national capital) is kept apart: Oslo is
# not a role some capitals play, so expansion never climbs from it.
_POINTERS = {"@": "hyper", "@i": "instance_of", "~": "hypo", "~i": "hypo", "+": "deriv"}
# WordNet's morphy detachment rules (morph.c).
_RULES = {
    "n": (("s", ""), ("ses", "s"), ("xes", "x"), ("zes", "z"), ("ches", "ch"), ("shes", "sh"), ("men", "man"),
          ("ies", "y")),
    "v": (("s", ""), ("ies", "y"), ("es", "e"), ("es", ""), ("ed", "e"), ("ed", ""), ("ing", "e"), ("ing", "")),
    "a": (("er", ""), ("est", ""), ("er", "e"), ("est", "e")),
    "r": (),
}
DEFAULT_DIRS = (Path("/usr/share/wordnet"), Path("/usr/local/share/wordnet"), Path("/opt/homebrew/share/wordnet"))


def find_dir(configured: str | None = None) -> Path | None:
    """The WordNet database directory: `configured`, else the first default that has data.noun."""
    candidates = [Path(configured)] if configured else list(DEFAULT_DIRS)
    return next((d for d in candidates if (d / "data.noun").is_file()), None)


_LOADING = threading.Lock()  # a worker's warm-up thread and its first query may ask at once
_configured: Path | None = None  # set by the entry point from the settings; None: the default directories


def use_directory(directory: Path | None) -> None:
    """Load this process's WordNet from `directory` (None: the default
    directories); called once by the entry point, before the first load."""
    global _configured
    with _LOADING:
        if directory != _configured:
            _configured = directory
            _default_lexicon.cache_clear()


def default_lexicon() -> "WordNet | None":
    """The loaded one (see below), loading it first under a lock."""
    with _LOADING:
        return _default_lexicon()


@lru_cache(maxsize=1)
def _default_lexicon() -> "WordNet | None":
    """This process's WordNet, loaded on first use: from the directory given to
    `use_directory` or a default one, cached under `$XDG_CACHE_HOME/emgas` (~/.cache/emgas).
    None, said once in the log, when there is none: queries then expand nothing."""
    directory = find_dir(str(_configured) if _configured else None)
    if directory is None:
        log.warning("no WordNet found (make wordnet, or EMGAS_WORDNET_DIR): query words the graph lacks are not expanded")
        return None
    try:
        return WordNet.load(directory, parse_cache.default_dir())
    except (OSError, ValueError, KeyError, IndexError) as err:
        log.warning("WordNet in %s unreadable (%s): query words the graph lacks are not expanded", directory, err)
        return None


def _norm(word: str) -> str:
    return word.strip().lower().replace("_", " ")


class WordNet:
    """Synsets are ints. words[s]: its lemmas; rel[s]: kind -> ((target, source word, target word), ...),
    word numbers 1-based, 0 for a pointer between whole synsets; index: lemma -> pos -> synsets. Each
    is a list or dict, or (loaded from the cache) a `wordnet_db.Table` read on demand."""

    def __init__(self, words: Any, rel: Any, index: Any, exceptions: dict) -> None:
        self.words, self.rel, self.index, self.exceptions = words, rel, index, exceptions

    @classmethod
    def load(cls, directory: Path, cache_dir: Path | None = None) -> "WordNet":
        """Parse `directory`, or reuse the cache of an earlier parse in `cache_dir`."""
        if cache_dir is None:
            return cls(*_parse(directory))
        sizes = sorted((f.name, f.stat().st_size) for f in directory.iterdir() if f.is_file())
        return cls(*wordnet_db.opened(cache_dir, sizes, lambda: _parse(directory)))

    def base_forms(self, word: str, pos: str) -> list[str]:
        """Lemmas of `word` as part of speech `pos` that WordNet has (its morphy)."""
        w = _norm(word)
        found = [b for b in self.exceptions.get(pos, {}).get(w, ()) if pos in self.index.get(b, {})]
        if pos in self.index.get(w, {}):
            found.append(w)
        if not found:
            for suffix, ending in _RULES[pos]:
                if w.endswith(suffix) and len(w) > len(suffix):
                    base = w[: len(w) - len(suffix)] + ending
                    if pos in self.index.get(base, {}):
                        found.append(base)
        return list(dict.fromkeys(found))

    def senses(self, word: str, pos: str, n: int) -> list[tuple[str, int]]:
        """(lemma, synset) of the first `n` senses of each base form, most frequent first."""
        return [(lemma, s) for lemma in self.base_forms(word, pos) for s in self.index[lemma][pos][:n]]

    def synonyms(self, word: str, n: int) -> list[str]:
        """Other lemmas of the word's first `n` senses, nouns, verbs and adjectives."""
        out: list[str] = []
        for pos in "nva":
            for lemma, s in self.senses(word, pos, n):
                out += [w for w in self.words[s] if w != lemma]
        return list(dict.fromkeys(out))

    def derivations(self, word: str, n: int) -> list[str]:
        """Derivationally related forms of the word's first `n` senses (mentor -> mentorship)."""
        out: list[str] = []
        for pos in "nva":
            for lemma, s in self.senses(word, pos, n):
                for target, source, to in self.rel[s].get("deriv", ()):
                    if source == 0 or self.words[s][source - 1] == lemma:
                        out += self.words[target] if to == 0 else [self.words[target][to - 1]]
        return list(dict.fromkeys(w for w in out if w != _norm(word)))

    def noun_senses(self, word: str, n: int) -> list[int]:
        return [s for _, s in self.senses(word, "n", n)]

    def hypernyms(self, synset: int) -> list[int]:
        return [t for t, _, _ in self.rel[synset].get("hyper", ())]

    def hyponym_count(self, synset: int) -> int:
        return len(self.rel[synset].get("hypo", ()))

    @lru_cache(maxsize=4096)  # noqa: B019 - one WordNet per process, kept for its life
    def size_below(self, synset: int, depth: int) -> int:
        """How many lemmas lie under `synset` within `depth` steps (cached: a
        wide category such as person takes ~10 ms to walk)."""
        return len(self.below([synset], depth))

    def below(self, synsets: list[int], depth: int) -> dict[str, int]:
        """Lemmas under `synsets` by hyponym pointers, up to `depth` steps: lemma -> steps (nearest)."""
        steps = {s: 0 for s in synsets}
        queue = deque(synsets)
        _fill(self.rel, synsets)
        while queue:
            s = queue.popleft()
            if steps[s] < depth:
                for t, _, _ in self.rel[s].get("hypo", ()):
                    if t not in steps:
                        steps[t] = steps[s] + 1
                        queue.append(t)
                if queue and steps[queue[0]] > steps[s]:  # the next level: read its rows at once
                    _fill(self.rel, (t for t in queue if steps[t] < depth))
        _fill(self.words, steps)
        out: dict[str, int] = {}
        for s, d in sorted(steps.items(), key=lambda item: item[1]):
            for w in self.words[s]:
                out.setdefault(w, d)
        return out


def _fill(table: Any, keys: Iterable[int]) -> None:
    """Have a table read from the file read the rows of `keys` at once (lists: nothing to do)."""
    fill = getattr(table, "fill", None)
    if fill is not None:
        fill(keys)


def _parse(directory: Path) -> tuple[list, list, dict, dict]:
    key: dict[tuple[str, str], int] = {}
    words: list[tuple[str, ...]] = []
    raw: list[list[tuple[str, str, str, int, int]]] = []
    for pos, name in _POS_FILES.items():
        for line in (directory / f"data.{name}").read_text(encoding="latin-1").splitlines():
            if not line or line.startswith("  "):
                continue  # the licence header
            fields = line.split(" | ", 1)[0].split()
            count, i, lemmas = int(fields[3], 16), 4, []
            for _ in range(count):
                lemma = fields[i]
                lemmas.append(_norm(lemma[: lemma.index("(")] if lemma.endswith(")") else lemma))
                i += 2
            pointers = []
            for _ in range(int(fields[i])):
                symbol, offset, target_pos, numbers = fields[i + 1 : i + 5]
                i += 4
                if symbol in _POINTERS:
                    target_pos = "a" if target_pos == "s" else target_pos
                    pointers.append((_POINTERS[symbol], target_pos, offset, int(numbers[:2], 16), int(numbers[2:], 16)))
            key[(pos, fields[0])] = len(words)
            words.append(tuple(lemmas))
            raw.append(pointers)
    rel = []
    for pointers in raw:
        kinds: dict[str, list] = {}
        for kind, target_pos, offset, source, to in pointers:
            kinds.setdefault(kind, []).append((key[(target_pos, offset)], source, to))
        rel.append({kind: tuple(v) for kind, v in kinds.items()})
    index: dict[str, dict[str, tuple[int, ...]]] = {}
    exceptions: dict[str, dict[str, tuple[str, ...]]] = {}
    for pos, name in _POS_FILES.items():
        for line in (directory / f"index.{name}").read_text(encoding="latin-1").splitlines():
            if not line or line.startswith("  "):
                continue
            fields = line.split()
            senses, pointer_count = int(fields[2]), int(fields[3])
            offsets = fields[6 + pointer_count : 6 + pointer_count + senses]
            index.setdefault(_norm(fields[0]), {})[pos] = tuple(key[(pos, o)] for o in offsets)
        exc = directory / f"{name}.exc"
        table = exceptions[pos] = {}
        if exc.is_file():
            for line in exc.read_text(encoding="latin-1").splitlines():
                fields = line.split()
                if len(fields) >= 2:
                    table[_norm(fields[0])] = tuple(_norm(f) for f in fields[1:])
    return words, rel, index, exceptions
