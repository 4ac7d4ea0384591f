"""Concept extraction: text -> concepts (normalised id, surface text, importance).

Space-delimited languages: by default every content word (simplemma lemma,
not a stopword), names first; or (`method="yake"`) YAKE key phrases
(unsupervised, one pass) lemmatised. Chinese, which has no spaces, gives
its words and character bigrams (`processors.chinese`), ranked by tf-idf.
The language is chosen per text.

Near-duplicate n-grams are collapsed to a minimal cover: a multi-word
candidate that contains another candidate ("kafka consumer lag" contains
"consumer lag") is dropped, and its importance is handed to the contained
one, so the graph gets one node per idea and queries for either part hit.
"""

from __future__ import annotations

import importlib.util
import re
import threading
import unicodedata
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Literal, NamedTuple, Sequence, TypeVar
from importlib.metadata import version as _version

import orjson
from pydantic import BaseModel, ConfigDict, Field

from emgas.processors import chinese
from emgas.processors.events import Concept, Turn, TurnIngested
from emgas.processors.events.graph import check_distinct_concepts

if TYPE_CHECKING:
    import yake

_TOKEN = re.compile(r"\w+(?:['’\-]\w+)*")
_POSSESSIVE = re.compile(r"['’]s$")
# Bumped whenever the same text and parameters give other concepts, so
# events say which extraction made them (2: possessives are stripped;
# 3: Chinese gives search-mode words and character bigrams; the lemmatiser
# sees each token's case, so names keep their form; 4: a Chinese bigram that
# is no word weighs half a bigram that is one).
REVISION = 4


class ExtractionParams(BaseModel):
    """Knobs of extraction; part of the extractor's identity (see `extractor_id`)."""

    model_config = ConfigDict(frozen=True)  # field docstrings: the settings reference (tools.reference reads them)

    method: Literal["words", "yake"] = "words"
    """"words": every content word (lemma, not a stopword), proper-noun-like ones first: as good as YAKE for
    retrieval on LoCoMo and many times faster (docs/retrieval.md, "Content words instead of YAKE, and the speaker's
    name"). "yake": YAKE key phrases."""
    max_concepts: int = Field(default=20, ge=1, le=100)
    """At most this many concepts per turn."""
    max_ngram: int = Field(default=3, ge=1, le=5)
    """YAKE: the longest key phrase, in words."""
    yake_score_scale: float = Field(default=0.1, gt=0)
    """importance = 1 / (1 + yake_score / yake_score_scale): YAKE scores are "lower is better", ~0.01 for a strong
    keyword and ~1 for a weak one."""
    default_language: str = "en"
    """The language of a text that is not Chinese."""
    cjk_ratio: float = Field(default=0.3, ge=0, le=1)
    """Share of CJK characters among letters above which a text is Chinese."""
    include_speaker: bool = True
    """Extract from "speaker: text", so the speaker's name can become a concept linking the turns of that speaker
    (questions name people)."""


def extractor_id(params: ExtractionParams) -> str:
    """A tag naming the extractor and its parameters, stored in every graph event."""
    method = f"yake-{_version('yake')}/n{params.max_ngram}s{params.yake_score_scale}" if params.method == "yake" else "words"
    return (
        f"{method}+simplemma-{_version('simplemma')}+jieba-{_version('jieba')}/k{params.max_concepts}"
        + ("+speaker" if params.include_speaker else "")
        + f"+r{REVISION}"
    )


def detect_language(text: str, params: ExtractionParams) -> str:
    """'zh' when CJK characters make up more than `cjk_ratio` of the letters."""
    letters = list(filter(str.isalpha, text))
    if not letters:
        return params.default_language
    known = _CJK_LETTERS
    for ch in set(letters).difference(known):
        known[ch] = "CJK" in unicodedata.name(ch, "")
    cjk = sum(map(known.__getitem__, letters))
    return "zh" if cjk / len(letters) > params.cjk_ratio else params.default_language


# Per letter met, whether its Unicode name says CJK: `unicodedata.name` is a
# few times the cost of a lookup, and a text's letters repeat (bounded by
# the letters that exist; a race between threads writes the same value).
_CJK_LETTERS: dict[str, bool] = {}


def normalise(phrase: str, language: str) -> str:
    """Concept id: lower-cased lemmas joined by single spaces ("Consumers" -> "consumer")."""
    tokens = _TOKEN.findall(phrase)
    lang = "en" if language == "zh" else language
    return " ".join(lemma(t, lang) for t in tokens)


def warm() -> None:
    """Load the English lemmatiser's dictionary (about 0.13 s, once per
    process) and YAKE's English stopwords (`stopword_set`), so the first
    passage a fold places and the first turn or query extracted do not."""
    _dictionary("en")
    stopword_set("en")


# A language's lemmatiser dictionary loads once per process: a fold or an
# extraction that needs it while `warm` loads it on another thread waits
# for that load rather than making a second one. simplemma itself is
# imported by the first load, not with this module: its import compiles its
# language detector's patterns (about 50 ms), which a worker's warm-up
# thread pays beside the start rather than the start itself.
_LOADING = threading.Lock()
_LOADED: set[str] = set()
_lemmatize: Callable[..., str] | None = None
_before_first_load: list[Callable[[], None]] = []


def before_first_load(hook: Callable[[], None]) -> None:
    """Run `hook` once simplemma is imported and before its first
    dictionary loads (an adapter's cache for its dictionaries), under the
    loads' lock: whichever thread loads first runs it (now, if one has)."""
    with _LOADING:
        if _lemmatize is None:
            _before_first_load.append(hook)
        else:
            hook()


def _dictionary(language: str) -> Callable[..., str]:
    """simplemma's lemmatiser, with `language`'s dictionary loaded."""
    global _lemmatize
    if language not in _LOADED or _lemmatize is None:
        with _LOADING:
            if _lemmatize is None:
                import simplemma

                for hook in _before_first_load:
                    hook()
                _before_first_load.clear()
                _lemmatize = simplemma.lemmatize
            if language not in _LOADED:
                _lemmatize("warming", lang=language)
                _LOADED.add(language)
    return _lemmatize


@lru_cache(maxsize=4096)
def speaker_key(speaker: str) -> str:
    """How a speaker's name appears among concept ids ("Joanna" -> "joanna"),
    so a query that names a person can be matched to the turns they spoke."""
    return normalise(speaker, "en")


def lemma(word: str, language: str) -> str:
    """Lower-cased lemma of one token; a possessive 's is dropped first
    ("Joanna's" -> "joanna"), so a name and its possessive are one concept.
    The lemmatiser sees the token's own case, which keeps names as they
    are ("Maria" -> "maria", not "mare"; "Mars" -> "mars") while "Dogs"
    still gives "dog"."""
    lemmatize = _lemmatize if language in _LOADED and _lemmatize is not None else _dictionary(language)
    return lemmatize(_POSSESSIVE.sub("", word), lang=language).lower()


class Candidate(NamedTuple):
    """A term a text may be about, before the minimal cover chooses among
    them (a plain tuple: a text has several times more candidates than
    concepts, and only the chosen become `Concept` models)."""

    id: str
    text: str
    importance: float


def extract(text: str, params: ExtractionParams, language: str | None = None) -> tuple[Concept, ...]:
    """Concepts of one text, most important first (ties by id: deterministic)."""
    return tuple(Concept(id=cid, text=word, importance=importance) for cid, word, importance in _chosen(text, params, language))


def _chosen(text: str, params: ExtractionParams, language: str | None) -> list[tuple[str, str, float]]:
    """`extract`'s concepts as (id, text, importance), before they are models."""
    language = language or detect_language(text, params)
    if language == "zh":
        return _chinese_chosen(text, params.max_concepts)
    if params.method == "words":
        return _content_words(text, language, params)
    return list(_minimal_cover(_yake_candidates(text, language, params))[: params.max_concepts])


_SENTENCE_END = ".!?:;\n"
PROPER_IMPORTANCE = 0.8  # a capitalised word that does not start a sentence
WORD_IMPORTANCE = 0.5


def _content_words(text: str, language: str, params: ExtractionParams) -> list[tuple[str, str, float]]:
    """Each distinct content word once (id = lemma; text = first surface form):
    importance 0.8 when it is capitalised mid-sentence (a name), else 0.5;
    ordered by importance, then first position; at most `max_concepts`."""
    stopwords = stopword_set(language)
    found: dict[str, tuple[float, int, str]] = {}
    for position, match in enumerate(_TOKEN.finditer(text)):
        word = _POSSESSIVE.sub("", match.group())
        lower = word.lower()
        if lower in stopwords or lower.isdigit() or len(lower) < 2:
            continue
        previous = _previous_char(text, match.start())
        proper = word[0].isupper() and previous is not None and previous not in _SENTENCE_END
        importance = PROPER_IMPORTANCE if proper else WORD_IMPORTANCE
        cid = lemma(word, language)
        first = found.get(cid)
        if first is None:
            found[cid] = (importance, position, word)
        elif importance > first[0]:
            found[cid] = (importance, first[1], first[2])
    ranked = sorted(found.items(), key=lambda item: (-item[1][0], item[1][1]))[: params.max_concepts]
    return [(cid, word, imp) for cid, (imp, _, word) in ranked]


def query_seeds(text: str, params: ExtractionParams) -> tuple[str, ...]:
    """Seed candidates of a query: its concept ids, then each of their words
    (then, for Chinese, every term; otherwise each lower-case word's lemma
    as if it were capitalised).

    A query phrase ("kafka consumer") may not be a node while its words
    are; trying both keeps recall without inventing concepts.
    """
    language = detect_language(text, params)
    ids = [c.id for c in extract(text, params, language)]
    words = [w for cid in ids for w in cid.split(" ") if " " in cid]
    if language == "zh":
        words += [_chinese_id(term) for term in chinese.terms(text)]
    else:  # a name typed in lower case ("maria") is found as its capitalised self
        stopwords = stopword_set(language)
        words += [lemma(t.capitalize(), language) for t in _TOKEN.findall(text) if t.islower() and t not in stopwords]
    return tuple(dict.fromkeys(x for x in ids + words if x))


_SENTENCE_BREAK = re.compile(r"[?？!！。；;]+|\.(?:\s|$)")


def query_parts(text: str) -> list[str]:
    """The questions of a query, split where a sentence ends ("我上司叫什么？
    另外，论坛的地点是什么？" is two): each part's seeds spread on their own
    (`processors.activation.spread_groups`), so the part with more words
    does not drown the other. Parts without a word character are dropped."""
    parts = [part.strip() for part in _SENTENCE_BREAK.split(text)]
    return [part for part in parts if re.search(r"\w", part)] or [text]


def _previous_char(text: str, position: int) -> str | None:
    """The last non-space character before `position`, if any."""
    i = position - 1
    while i >= 0 and text[i].isspace():
        i -= 1
    return text[i] if i >= 0 else None


def content_words(text: str, language: str = "en") -> list[str]:
    """Lemmas of the words of `text` that are not stopwords (YAKE's list), lower case."""
    stopwords = stopword_set(language)
    return [lemma(w, language) for w in _TOKEN.findall(text) if w.lower() not in stopwords]


@lru_cache(maxsize=16)
def stopword_set(language: str) -> frozenset[str]:
    """YAKE's stopword list for `language` (its `stopword_set`, as its
    `KeywordExtractor._load_stopwords` reads it: the file of the language's
    first two letters, else the language-free one, lower-cased lines), read
    from YAKE's package without importing it: the import takes 0.2 s
    (networkx), which only the `yake` method's key phrases need."""
    spec = importlib.util.find_spec("yake")
    assert spec is not None and spec.submodule_search_locations, "yake is a dependency"
    lists = Path(next(iter(spec.submodule_search_locations))) / "core" / "StopwordsList"
    path = lists / f"stopwords_{language[:2].lower()}.txt"
    if not path.exists():
        path = lists / "stopwords_noLang.txt"
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        text = path.read_text(encoding="ISO-8859-1")
    return frozenset(text.lower().split("\n"))


@lru_cache(maxsize=16)
def _yake(language: str, max_ngram: int, top: int) -> yake.KeywordExtractor:
    import yake  # noqa: PLC0415 - with networkx, a sixth of a worker's imports: loaded when first extracting (`warm`)

    return yake.KeywordExtractor(lan=language, n=max_ngram, dedupLim=0.9, top=top)


def _yake_candidates(text: str, language: str, params: ExtractionParams) -> list[Candidate]:
    extractor = _yake(language, params.max_ngram, params.max_concepts * 3)
    stopwords = extractor.stopword_set
    out = []
    for surface, score in extractor.extract_keywords(text):
        cid = normalise(surface, language)
        words = cid.split(" ")
        if not cid or any(w in stopwords or w.isdigit() or len(w) < 2 for w in words):
            continue
        importance = 1.0 / (1.0 + float(score) / params.yake_score_scale)
        out.append(Candidate(cid, surface, _clamp(importance)))
    return out


def _chinese_chosen(text: str, most: int) -> list[tuple[str, str, float]]:
    """The `most` concepts of a Chinese text: its terms (`processors.chinese.terms`),
    importance = tf·idf / the text's highest tf·idf; ASCII words inside
    (Kafka, OPPOReno7) as lemmas. `_minimal_cover` of them, without a
    `Candidate` per term where no id holds a space (nearly every text: a
    turn has ~20 terms): equal ids merged keeping the first of the highest
    importance, most important first, ties by id."""
    weights = chinese.weights(text)
    if not weights:
        return []
    top = max(weights.values())
    best: dict[str, tuple[float, str]] = {}
    for term, weight in weights.items():
        cid = term if not term.isascii() else normalise(term, "zh")  # `_chinese_id`, inlined
        if cid and not cid.isdigit():
            importance = min(1.0, max(1e-6, weight / top))  # `_clamp`, inlined
            held = best.get(cid)
            if held is None or importance > held[0]:
                best[cid] = (importance, term)
    if " " in "".join(best):  # a phrase may contain another id: the cover decides
        return list(_minimal_cover([Candidate(cid, term, imp) for cid, (imp, term) in best.items()])[:most])
    ranked = sorted(best.items(), key=lambda item: (-item[1][0], item[0]))[:most]
    return [(cid, term, importance) for cid, (importance, term) in ranked]


def _chinese_id(term: str) -> str:
    return normalise(term, "zh") if term.isascii() else term


def _clamp(x: float) -> float:
    return min(1.0, max(1e-6, x))


def _minimal_cover(candidates: Sequence[Candidate]) -> list[Candidate]:
    """Merge equal ids (keep the best importance) and drop n-grams containing
    another (which passes its importance on when higher); most important
    first, ties by id."""
    best: dict[str, Candidate] = {}
    for c in candidates:
        held = best.get(c.id)
        if held is None or c.importance > held.importance:
            best[c.id] = c
    if " " not in "".join(best):  # no id of several words: none contains another (nearly every Chinese text)
        return sorted(best.values(), key=lambda c: (-c.importance, c.id))
    importance = {cid: c.importance for cid, c in best.items()}
    # Only an id of several words contains another (a one-word id holds no
    # inner space for a shorter id to start or end at), and only a shorter
    # one: most ids, and nearly every Chinese one, need no comparison at all.
    kept = []
    for cid in best:
        parts = [other for other in best if len(other) < len(cid) and _contains(cid, other)] if " " in cid else []
        if parts:
            for part in parts:
                importance[part] = max(importance[part], importance[cid])
        else:
            kept.append(cid)
    concepts = [
        best[cid] if importance[cid] == best[cid].importance else best[cid]._replace(importance=importance[cid])
        for cid in kept
    ]
    return sorted(concepts, key=lambda c: (-c.importance, c.id))


def _contains(longer: str, shorter: str) -> bool:
    """Does the word sequence `longer` contain `shorter` as contiguous words?"""
    return f" {shorter} " in f" {longer} "


def ingest(turn: Turn, params: ExtractionParams, extractor: str) -> TurnIngested:
    """The graph event of a turn: the turn, its language and its concepts.

    `extractor` is `extractor_id(params)`, passed in so callers compute it once.
    """
    language = detect_language(turn.text, params)
    # One validation of the event with its concepts, not a model per concept first.
    return TurnIngested.model_validate({
        **turn.model_dump(exclude={"type", "schema_version"}),
        "language": language,
        "extractor": extractor,
        "concepts": [{"id": cid, "text": word, "importance": imp}
                     for cid, word, imp in _chosen(_source(turn, params), params, language)],
    })


def ingest_encoded(turn: Turn, params: ExtractionParams, extractor: str) -> bytes:
    """`codec.encode(ingest(turn, params, extractor))`, the same bytes,
    without the event's model (a worker sends the bytes; its fold decodes
    them as rows, `fold_codec`). orjson writes JSON as pydantic does (the
    same floats, escapes and times; `tests/unit/processors/test_ingest_encoded.py`),
    and the fields go in TurnIngested's order. The turn's fields were
    validated with the turn; what the model checked of the concepts is
    checked here (`_check_concepts`): ValueError if the extraction broke it."""
    language = detect_language(turn.text, params)
    concepts = _chosen(_source(turn, params), params, language)
    _check_concepts(concepts)
    return orjson.dumps({
        "type": "turn_ingested", "schema_version": 2, "graph_id": turn.graph_id, "graph_version": None,
        "turn_id": turn.turn_id, "speaker": turn.speaker, "text": turn.text, "timestamp": turn.timestamp,
        "session_id": turn.session_id, "metadata": turn.metadata, "language": language, "extractor": extractor,
        "concepts": [{"id": cid, "text": word, "importance": imp} for cid, word, imp in concepts],
    }, option=orjson.OPT_UTC_Z)


def _source(turn: Turn, params: ExtractionParams) -> str:
    """The text concepts are extracted from: the turn's, after its speaker's name if `include_speaker`."""
    return f"{turn.speaker}: {turn.text}" if params.include_speaker and turn.speaker.strip() else turn.text


def _check_concepts(concepts: list[tuple[str, str, float]]) -> None:
    """What `TurnIngested` and `Concept` require of a turn's concepts: ids
    distinct and not empty, texts not empty, importance in (0, 1]."""
    check_distinct_concepts([cid for cid, _, _ in concepts])
    for cid, word, importance in concepts:
        if not cid or not word or not 0.0 < importance <= 1.0:
            raise ValueError(f"concept {cid!r} ({word!r}) has an empty id or text, or importance {importance} not in (0, 1]")


def ingest_all(turns: list[Turn], params: ExtractionParams, extractor: str) -> list[TurnIngested | str]:
    """`ingest` of each turn, in order. Errors are data: a turn whose
    extraction raises gives the error's text in its place, and the rest of
    the batch goes on."""
    return _each(turns, lambda turn: ingest(turn, params, extractor))


def encode_all(turns: list[Turn], params: ExtractionParams, extractor: str) -> list[bytes | str]:
    """`ingest_encoded` of each turn, in order, errors as in `ingest_all` (a
    module-level function: it can run in another process)."""
    return _each(turns, lambda turn: ingest_encoded(turn, params, extractor))


_Result = TypeVar("_Result")


def _each(turns: list[Turn], extract: Callable[[Turn], _Result]) -> list[_Result | str]:
    results: list[_Result | str] = []
    for turn in turns:
        try:
            results.append(extract(turn))
        except Exception as exc:  # noqa: BLE001 - reported per turn (the DLQ), never the batch's end
            results.append(f"{type(exc).__name__}: {exc}")
    return results
