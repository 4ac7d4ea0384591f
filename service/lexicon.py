"""The lexicon query expansion reads (`processors.expansion.Lexicon`):
WordNet for English words, CC-CEDICT for Chinese ones, each loaded on
first use (`service.wordnet`, `service.cedict`)."""

from __future__ import annotations

from typing import Callable

from emgas.processors import chinese
from emgas.processors.expansion import Lexicon
from emgas.service.cedict import default_cedict
from emgas.service.wordnet import default_lexicon as default_wordnet


class ByScript:
    """A word with Chinese characters is looked up in `chinese` (loaded on
    the first such word), any other in `english`; senses (ints) are
    WordNet's, as only it has a noun hierarchy."""

    def __init__(self, english: Lexicon | None, chinese_lexicon: Callable[[], Lexicon | None]) -> None:
        self._english = english
        self._chinese = chinese_lexicon

    def _of(self, word: str) -> Lexicon | None:
        return self._chinese() if chinese.cjk_runs(word) else self._english

    def synonyms(self, word: str, n: int) -> list[str]:
        lexicon = self._of(word)
        return lexicon.synonyms(word, n) if lexicon else []

    def derivations(self, word: str, n: int) -> list[str]:
        lexicon = self._of(word)
        return lexicon.derivations(word, n) if lexicon else []

    def noun_senses(self, word: str, n: int) -> list[int]:
        lexicon = self._of(word)
        return lexicon.noun_senses(word, n) if lexicon else []

    def hypernyms(self, synset: int) -> list[int]:
        return self._english.hypernyms(synset) if self._english else []

    def below(self, synsets: list[int], depth: int) -> dict[str, int]:
        return self._english.below(synsets, depth) if self._english else {}

    def hyponym_count(self, synset: int) -> int:
        return self._english.hyponym_count(synset) if self._english else 0

    def size_below(self, synset: int, depth: int) -> int:
        return self._english.size_below(synset, depth) if self._english else 0


def default_lexicon() -> ByScript:
    """This process's WordNet (loaded now) and CC-CEDICT (on the first
    Chinese word); either may be missing, said once in the log."""
    return ByScript(default_wordnet(), default_cedict)
