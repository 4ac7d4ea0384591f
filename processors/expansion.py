"""Query words the graph does not hold, reached through a lexicon
(relation-aware spreading activation: typed is-a, synonym and derivation
links that activation follows at their own weight).

People ask in category words and other forms of the words they said:
"what pets do I have?" of a graph that holds `greyhound`, "tell me about my
family" of one that holds `sister`. A query word that is not a concept of
the graph is looked up in the lexicon (WordNet 3.0, `service.wordnet`), and
the graph's concepts it names become weak seeds:

- its synonyms and derivationally related forms (tourney → tournament,
  mentor → mentorship);
- the words below its noun senses (hyponyms, up to BELOW_DEPTH steps:
  activity → pottery, relative → sister); a sense with fewer than
  FEW_BELOW words right below it (pet: none; kin: one) is a role some
  members of a category play, so the search starts one step up (pet →
  animal → … → greyhound; family → kin → relative → … → sister), unless
  that category is too wide to mean anything (more than MAX_CATEGORY words
  within BELOW_DEPTH: fish → Pisces → person).

Only concepts the graph holds are kept, nearest first, at most
MAX_PER_WORD; together they start with EXPANSION_MASS, shared equally: a
word the graph lacks counts for half a seed whatever it expands to.
Pure: the lexicon is passed in, and nothing here reads a file.
"""

from __future__ import annotations

import re
from typing import Callable, Iterable, Mapping, Protocol, Sequence

import numpy as np

SENSES = 5  # the most frequent senses of a word that are followed (family's 5th: kin)
FEW_BELOW = 3
MAX_CATEGORY = 1500  # animal: 837 words, leader (boss -> manager): 1,321, person: 14,016
BELOW_DEPTH = 4
MAX_PER_WORD = 12
EXPANSION_MASS = 0.5


class Lexicon(Protocol):
    def synonyms(self, word: str, n: int) -> list[str]: ...
    def derivations(self, word: str, n: int) -> list[str]: ...
    def noun_senses(self, word: str, n: int) -> list[int]: ...
    def hypernyms(self, synset: int) -> list[int]: ...
    def below(self, synsets: list[int], depth: int) -> dict[str, int]: ...
    def hyponym_count(self, synset: int) -> int: ...
    def size_below(self, synset: int, depth: int) -> int: ...


def related_concepts(word: str, lexicon: Lexicon, is_concept: Callable[[str], bool]) -> list[str]:
    """The graph's concepts that `word` names in other words, nearest first:
    synonyms and derived forms, then hyponyms by steps (ties: as the lexicon
    lists them); at most MAX_PER_WORD; never `word` itself."""
    near = lexicon.synonyms(word, SENSES) + lexicon.derivations(word, SENSES)
    starts: list[int] = []
    for sense in lexicon.noun_senses(word, SENSES):
        if lexicon.hyponym_count(sense) >= FEW_BELOW:
            starts.append(sense)
        else:
            starts += [up for up in lexicon.hypernyms(sense) if lexicon.size_below(up, BELOW_DEPTH) <= MAX_CATEGORY]
    below = lexicon.below(list(dict.fromkeys(starts)), BELOW_DEPTH)
    found = [w for w in dict.fromkeys(near + list(below)) if w != word and is_concept(w)]
    return found[:MAX_PER_WORD]


def expansion_seeds(words: list[str], lexicon: Lexicon, is_concept: Callable[[str], bool]) -> dict[str, float]:
    """concept -> starting activation for the query words the graph lacks:
    each word's related concepts share EXPANSION_MASS equally; a concept
    two words reach gets both shares."""
    seeds: dict[str, float] = {}
    for word in words:
        related = related_concepts(word, lexicon, is_concept)
        for concept in related:
            seeds[concept] = seeds.get(concept, 0.0) + EXPANSION_MASS / len(related)
    return seeds


# Semantic seeds: concepts whose word vectors are near a query word's
# (a sentence encoder's vectors of single words, cosine). Few and weak: a
# near word is a guess, so it gets less than a seed the query names, and
# only close neighbours count. This floor and this mass scored best of those
# tried (docs/retrieval.md, "Semantic seeds").
SIMILAR_MIN_COSINE = 0.6
SIMILAR_PER_WORD = 3
SIMILAR_MASS = 0.5


def similar_seeds(
    words: Sequence[str],
    word_vectors: np.ndarray,
    concept_ids: Sequence[str],
    concept_vectors: np.ndarray,
    allowed: Callable[[str], bool],
) -> dict[str, float]:
    """concept -> starting activation: for each query word (row of
    `word_vectors`, unit length), its SIMILAR_PER_WORD most similar allowed
    concepts (rows of `concept_vectors`, unit length) with cosine ≥
    SIMILAR_MIN_COSINE, never the word itself, sharing SIMILAR_MASS
    equally. Ties by concept id, so the result does not depend on row order."""
    seeds: dict[str, float] = {}
    if not len(concept_ids):
        return seeds
    cosines = word_vectors @ concept_vectors.T  # words × concepts
    for word, row in zip(words, cosines):
        near: list[int] = np.flatnonzero(row >= SIMILAR_MIN_COSINE).tolist()
        ranked = sorted(near, key=lambda i: (-float(row[i]), concept_ids[i]))
        chosen = [concept_ids[i] for i in ranked if concept_ids[i] != word and allowed(concept_ids[i])]
        chosen = chosen[:SIMILAR_PER_WORD]
        for concept in chosen:
            seeds[concept] = seeds.get(concept, 0.0) + SIMILAR_MASS / len(chosen)
    return seeds


# Character seeds (Chinese): a query character that no seed of its question
# holds reaches the concepts that contain it (车 → 自行车, 电动车), as
# character BM25 matches it. A character in more than CHARACTER_MAX_CONCEPTS
# concepts says little (its IDF is low) and seeds nothing.
CHARACTER_MASS = 0.5
CHARACTER_MAX_CONCEPTS = 30


def character_seeds(
    characters: Sequence[str], containing: Callable[[str], Sequence[str]], allowed: Callable[[str], bool],
    mass: float = CHARACTER_MASS, max_concepts: int = CHARACTER_MAX_CONCEPTS,
) -> dict[str, float]:
    """concept -> starting activation: each character's allowed concepts
    (`containing(ch)`, sorted) share `mass` equally, when there are at most
    `max_concepts` of them; a concept two characters reach gets both shares."""
    seeds: dict[str, float] = {}
    for ch in characters:
        found = [c for c in containing(ch) if allowed(c)]
        if not found or len(found) > max_concepts:
            continue
        for concept in found:
            seeds[concept] = seeds.get(concept, 0.0) + mass / len(found)
    return seeds


# Everyday words (verbs, and category words WordNet files elsewhere) whose
# answer is a noun of another category: "where do I live?" is answered by a
# flat or a house, "what sport am I doing?" by a race, "what do I do for a
# living?" by a job. A query word here seeds the category words the graph
# holds and what they name (`related_concepts`), like a word the graph
# lacks, and is not itself expanded through its own senses: "stay" as a
# noun is a brace of a corset, whose kinds include the band that took "who
# is coming to stay with us?" to a brass band.
CATEGORIES_OF = {
    "live": ("housing",), "dwell": ("housing",), "reside": ("housing",), "home": ("housing",),
    "sport": ("race", "game"), "exercise": ("race",), "train": ("race",),
    "visit": ("visitor", "guest"), "stay": ("visitor", "guest"),
    "living": ("job", "work"),
    # Chinese (a query's words and bigrams): 住在 of a rented flat, 运动 of a marathon, 工作 of 上班.
    "住在": ("房子", "公寓", "住房"), "运动": ("马拉松", "跑步", "比赛", "健身"), "工作": ("上班", "职业"),
}


def category_seeds(words: Sequence[str], lexicon: Lexicon, is_concept: Callable[[str], bool]) -> dict[str, float]:
    """concept -> starting activation for the query words of CATEGORIES_OF:
    each category word the graph holds and its related concepts, as
    `expansion_seeds` gives them (EXPANSION_MASS per category word)."""
    seeds: dict[str, float] = {}
    for category in dict.fromkeys(c for w in dict.fromkeys(words) for c in CATEGORIES_OF.get(w, ())):
        found = ([category] if is_concept(category) else []) + related_concepts(category, lexicon, is_concept)
        found = list(dict.fromkeys(found))[:MAX_PER_WORD]
        for concept in found:
            seeds[concept] = seeds.get(concept, 0.0) + EXPANSION_MASS / len(found)
    return seeds


# Names (the second hop of "what did the cat damage?"): a thing is often
# introduced once with its name ("we got a kitten and named her Miso",
# "一只小猫，给它取名叫年糕") and spoken of later only by the name ("Miso
# shredded the sofa"). A seed that few passages mention passes its start to
# the names those passages give it, so the later passages are found under
# the name as the thing itself is (an alias, not an association).
NAME_MAX_PASSAGES = 3  # a seed in more passages is no one thing that was named
NAME_WEIGHT = 1.0  # a name starts as its thing does
_NAMED_EN = re.compile(
    r"\b(?:named|called|nicknamed|name (?:is|was))\s+(?:(?:him|her|it|them|the \w+)\s+)?([A-Z][\w'’-]*)"
)
_NAMED_ZH = re.compile(r"(?:名字叫做|名字叫|名字是|取名叫|取名为|取名|起名叫|起名为|起名|名叫|叫做)\s*([\u4e00-\u9fffA-Za-z]{1,8})")


def names_given(text: str) -> list[str]:
    """The names `text` gives something ("named her Miso" → Miso; "取名叫年糕的"
    → 年糕的, whose prefixes the caller matches against its concepts), in order."""
    return [m.group(1) for pattern in (_NAMED_EN, _NAMED_ZH) for m in pattern.finditer(text)]


def name_seeds(
    group: Mapping[str, float],
    passages_of: Callable[[str], Sequence[str]],
    texts: Callable[[list[str]], Iterable[str]],
    concept_of: Callable[[str], str | None],
) -> dict[str, tuple[float, str]]:
    """name concept -> (starting activation, the seed it names) for the names
    that the passages of the group's seeds give them: each seed with at most
    NAME_MAX_PASSAGES passages (`passages_of`, turn ids) has their `texts`
    read for naming phrases (`names_given`); a name that is a concept of the
    graph (`concept_of`: a name or one of its prefixes -> the concept id, or
    None) and not a seed already starts at NAME_WEIGHT × the seed's start
    (the strongest seed naming it, when several do)."""
    found: dict[str, tuple[float, str]] = {}
    for seed, start in group.items():
        passages = passages_of(seed)
        if not passages or len(passages) > NAME_MAX_PASSAGES:
            continue
        for text in texts(list(passages)):
            for name in names_given(text):
                cid = concept_of(name)
                if cid is not None and cid != seed and cid not in group:
                    if cid not in found or found[cid][0] < NAME_WEIGHT * start:
                        found[cid] = (NAME_WEIGHT * start, seed)
    return found
