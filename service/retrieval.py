"""Answering an activation query from a partition's state (reads only).

Serving a query writes nothing: its reinforcement of the concepts it
activated is a `retrieved` event that the query agent appends to the log,
applied like every other change.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Callable, Literal

import numpy as np

from emgas.processors.activation import (
    ActivationParams,
    concept_scores,
    fuse_questions,
    named_speakers,
    rank_passages,
    seeded_scores,
    spread_groups,
    top_concepts,
)
from emgas.processors.dialogue import weighted_parts
from emgas.processors.errors import QueryError
from emgas.processors.events import (
    ActivationQuery,
    ActivationReply,
    Boost,
    HeldPassage,
    PassageQuery,
    PassagesReply,
    Retrieved,
    StatsQuery,
    StatsReply,
    TopConcept,
    GraphStats,
    RankedConcept,
    RankedPassage,
    Timings,
)
from emgas.processors import chinese, dates
from emgas.processors.expansion import (
    CATEGORIES_OF, Lexicon, category_seeds, character_seeds, expansion_seeds, name_seeds, similar_seeds,
)
from emgas.processors.extract import ExtractionParams, detect_language, normalise, query_parts, query_seeds
from emgas.processors.graph import GraphParams, on_grid
from emgas.state.projector import PartitionState
from emgas.state.view import GraphView
from emgas.service.characters import CharacterIndex
from emgas.service.encoder import Encodes, model_tag, on_demand, preload_once
from emgas.service.semantic import VectorCache
from emgas.service.word_store import WordStore
from emgas.service.cedict import default_cedict
from emgas.service.lexicon import default_lexicon

Clock = Callable[[], float]  # seconds, monotonic
_VECTORS = VectorCache()  # concept vectors per graph version, for semantic seeds


@dataclass(frozen=True)
class Seeds:
    """What a query starts from: one group per question (concept -> starting
    activation), the query words the graph lacks, and the concepts reached
    for the query's words through the lexicon or word vectors (weak seeds)."""

    groups: list[dict[str, float]]
    ids: list[str]  # the seeds the query's own words gave, once, in query order
    unmatched: list[str]
    expanded: list[str]
    # a name seed -> the seed it names (kitten -> Miso): one subject, counted once in a passage with both
    aliases: dict[str, str] = field(default_factory=dict)


Texts = Callable[[list[str]], list[str]]  # turn ids -> the texts of those the graph holds


def find_seeds(
    view: GraphView, query: ActivationQuery, extraction: ExtractionParams, lexicon: Lexicon | None = None,
    encoder: Encodes | None = None, passage_texts: Texts | None = None,
) -> Seeds:
    """One group per question of the query's text (`query_parts`), or one
    for a dialogue window (`processors.dialogue.weighted_parts`: each
    utterance's seeds at its weight, the highest where they meet), then one
    of its explicit seeds: its words that are concepts of the graph start at
    1; with a `lexicon`, the words that are not seed what it relates them to
    (`processors.expansion.expansion_seeds`, each word half a seed in all);
    with an `encoder`, every word of a question not in Chinese (the model
    is English) seeds its nearest concepts (`similar_seeds`, half a seed);
    a Chinese question's characters that none of its seeds holds seed the
    concepts containing them (`character_seeds`, half a seed each); with
    `passage_texts`, a seed in few passages passes its start
    to the names they give it (`name_seeds`: kitten -> Miso)."""
    dialogue = weighted_parts(query.text) if query.text else None
    texts = (dialogue or [(part, 1.0) for part in query_parts(query.text)]) if query.text else []
    parts = [(list(query_seeds(text, extraction)), weight) for text, weight in texts]
    parts.append(([form for seed in query.seeds for form in (seed, normalise(seed, "en"))], 1.0))
    groups: list[dict[str, float]] = []
    window: dict[str, float] = {}  # a dialogue window's one group
    ids: list[str] = []
    unmatched: list[str] = []
    expanded: list[str] = []
    aliases: dict[str, str] = {}
    chinese_query = bool(query.text and chinese.cjk_runs(query.text))
    speakers = view.speakers() if lexicon is not None or encoder is not None or chinese_query else set()
    for number, (words, weight) in enumerate(parts):
        group = {cid: 1.0 for cid in words if cid in view.index}
        ids += group
        missing = [w for w in dict.fromkeys(words) if w not in view.index and " " not in w]
        own_senses = [w for w in missing if w not in CATEGORIES_OF]  # an everyday verb is read as its categories
        unmatched += missing
        if lexicon is not None and own_senses:
            # A speaker's name is no instance of a category word, only a hub.
            related = expansion_seeds(
                own_senses, lexicon, lambda w: w in view.index and w not in group and w not in speakers,  # noqa: B023 - called here
            )
            group.update(related)
            expanded += related
        if lexicon is not None:
            # A speaker's name is no instance of a category word, only a hub.
            named = category_seeds(
                words, lexicon, lambda w: w in view.index and w not in group and w not in speakers,  # noqa: B023 - called here
            )
            group.update(named)
            expanded += named
        if number < len(texts) and chinese.cjk_runs(texts[number][0]):
            for cid, start in _character_seeds(view, texts[number][0], group, speakers).items():
                group[cid] = group.get(cid, 0.0) + start
        if encoder is not None and words and detect_language(" ".join(words), extraction) != "zh":
            similar = _similar(view, [w for w in dict.fromkeys(words) if " " not in w], encoder, group, speakers)
            for cid, start in similar.items():
                group[cid] = group.get(cid, 0.0) + start
            expanded += similar
        if passage_texts is not None and group:
            for name, (start, thing) in _name_seeds(view, group, passage_texts, speakers).items():
                group[name] = start
                aliases[name] = thing
                expanded.append(name)
        if dialogue is not None and number < len(dialogue):
            for cid, start in group.items():
                window[cid] = max(window.get(cid, 0.0), weight * start)
        elif group:
            groups.append(group)
    if window:
        groups.insert(0, window)
    once = [list(dict.fromkeys(x)) for x in (ids, unmatched, expanded)]
    return Seeds(groups, once[0], once[1], once[2], aliases)


_CHARACTERS = CharacterIndex()
NAME_MIN_START = 0.1  # weaker seeds (a character's share) pass on no name


def _name_seeds(
    view: GraphView, group: dict[str, float], texts: Texts, speakers: set[str]
) -> dict[str, tuple[float, str]]:
    """The names the passages of the group's seeds give them (kitten -> Miso)."""

    def concept_of(name: str) -> str | None:
        if chinese.cjk_runs(name):
            for end in range(len(name), 1, -1):
                if name[:end] in view.index and name[:end] not in speakers:
                    return name[:end]
            return None
        cid = normalise(name, "en")
        return cid if cid in view.index and cid not in speakers else None

    strong = {cid: start for cid, start in group.items() if start >= NAME_MIN_START}
    return name_seeds(strong, lambda cid: view.passage_ids[view.index[cid]], texts, concept_of)


def _character_seeds(view: GraphView, text: str, group: dict[str, float], speakers: set[str]) -> dict[str, float]:
    """Character seeds of a Chinese question: its characters that none of its
    seeds holds, each reaching the concepts that contain it."""
    held = "".join(group)
    characters = [ch for ch in chinese.characters(text) if ch not in held]
    return character_seeds(
        characters, lambda ch: _CHARACTERS.containing(view, ch),
        lambda cid: cid not in group and cid not in speakers,
    )


def _similar(
    view: GraphView, words: list[str], encoder: Encodes, group: dict[str, float], speakers: set[str]
) -> dict[str, float]:
    graph = _VECTORS.of(view.ref)
    ids, vectors = _VECTORS.current(view, encoder.encode)
    return similar_seeds(
        words, graph.of(words, _VECTORS.words, encoder.encode), ids, vectors,
        lambda cid: cid in view.index and cid not in group and cid not in speakers,
    )


def warm_up(params: ActivationParams, word_vectors: Path | None = None) -> None:
    """Load what query expansion needs (WordNet's file opened, parsed once
    per machine; CC-CEDICT) now, so the first query a worker answers does
    not wait for them, and check the encoder's files (hashed once).
    `word_vectors`: a worker's folder for word vectors kept across processes;
    given, new concepts are encoded in the background, never on a query
    (`service.semantic`). The encoder's session is not built here: see
    `build_encoder_ahead`."""
    if params.expansion:
        default_lexicon()
        default_cedict()
    if params.semantic:
        encoder = on_demand()
        if encoder is not None and word_vectors is not None:
            _VECTORS.serve_from(WordStore(word_vectors / f"word-vectors-{model_tag()}.sqlite3"), encoder.encode)


def build_encoder_ahead(params: ActivationParams) -> None:
    """Start building the encoder's session on a thread, once per process
    (`encoder.preload`). A worker does it once its first partition has
    caught up: a takeover's first answers need only the vectors on disk,
    and a query that meets a word without one waits for the session (as
    every query did before it was built), while the session's memory
    (157 MiB) is taken at start, not when a first new word comes mid-service."""
    if params.semantic:
        preload_once()


def prefetch_graphs(state: PartitionState, params: ActivationParams) -> int:
    """Hand the concept vectors of the graphs of `state` that its catch-up
    loaded (at most as many as the cache keeps) to the background encoder
    (`VectorCache.prefetch`), so that a partition just taken over serves at
    once and its queries soon find every vector; the concepts handed over."""
    if not params.semantic or on_demand() is None:
        return 0
    loaded = state.views.loaded()  # the graphs its catch-up touched; others load (and look up) on use
    return sum(
        _VECTORS.prefetch(view)
        for ref, view in list(loaded.items())[-_VECTORS.max_graphs:]
        if state.repo.active_version(ref.graph_id) == ref.version
    )


def drop_vectors(state: PartitionState) -> int:
    """Forget the concept vectors of every graph of `state` (its partition
    is handed over: a worker's memory follows the partitions it holds);
    the rows dropped."""
    return _VECTORS.drop(list(state.repo.graph_refs()))


def seed_ids(view: GraphView, query: ActivationQuery, extraction: ExtractionParams) -> list[str]:
    """Concept ids of the query's own seeds that exist in the graph, in query order."""
    return find_seeds(view, query, extraction).ids


def answer(
    state: PartitionState,
    query: ActivationQuery,
    defaults: ActivationParams,
    extraction: ExtractionParams,
    clock: Clock,
    trace: list[tuple[np.ndarray, np.ndarray]] | None = None,
    lexicon: Lexicon | None | Literal["default"] = "default",
    encoder: Encodes | None | Literal["default"] = "default",
) -> ActivationReply:
    """Spread activation from the query's seeds; return ranked concepts and passages
    (`trace`: see `processors.activation.spread`; `lexicon`: what expands query
    words the graph lacks, "default": `service.lexicon.default_lexicon()`;
    `encoder`: word vectors for semantic seeds, "default": the one of
    `emgas[dense]` when installed)."""
    started = clock()
    view = state.view(query.graph_id, query.graph_version)
    if view is None:
        which = f"graph {query.graph_id!r}" + (f" version {query.graph_version}" if query.graph_version else "")
        raise QueryError("graph_not_found", f"{which} has no turns on this worker")
    params = defaults.overridden_by(query.params)
    lexicon = (default_lexicon() if lexicon == "default" else lexicon) if params.expansion else None
    encoder = (on_demand() if encoder == "default" else encoder) if params.semantic else None
    seeds = find_seeds(view, query, extraction, lexicon, encoder, _texts(state, view))
    extracted = clock()
    spreading = view.neighbours(params.weight, params.fan, params.topic_weight)
    activation, iterations, each = spread_groups(
        view.nodes, [{view.index[cid]: a for cid, a in g.items()} for g in seeds.groups], spreading, params, trace
    )
    activation = activation[: view.size]  # topic nodes have no passages
    spread_done = clock()
    scores, top = _scored(view, activation, params)
    named = named_speakers(seeds.ids, view.speakers())
    starts = [{view.index[cid] for cid in group} for group in seeds.groups]
    alias_of = {view.index[name]: view.index[thing] for name, thing in seeds.aliases.items()}
    when = dates.window(query.text) if query.text and params.date_boost > 0 else None
    wanted = params.top_passages if when is None else max(params.top_passages, DATE_DEPTH)
    if len(each) > 1:
        depth = max(wanted, FUSION_DEPTH)
        rankings = [
            _ranked(view, *_scored(view, a[: view.size], params), params, named, depth, started, alias_of)
            for a, started in zip(each, starts)
        ]
        ranked = fuse_questions(rankings, wanted)
    else:
        ranked = _ranked(view, scores, top, params, named, wanted, starts[0] if starts else set(), alias_of)
    passages = state.repo.passages(view.ref, [pid for pid, _ in ranked])
    if when is not None:
        ranked = within(ranked, {pid: p.timestamp for pid, p in passages.items()}, when, params.date_boost)
        ranked = ranked[: params.top_passages]
    finished = clock()
    return ActivationReply(
        request_id=query.request_id,
        graph_id=query.graph_id,
        seeds=tuple(seeds.ids),
        concepts=tuple(
            RankedConcept(id=view.ids[i], text=view.texts[i], activation=float(activation[i]), score=float(scores[i]))
            for i in top
        ),
        passages=tuple(
            RankedPassage(
                turn_id=pid, speaker=passages[pid].speaker, text=passages[pid].text,
                timestamp=passages[pid].timestamp, score=score,
            )
            for pid, score in ranked
        ),
        iterations=iterations,
        stats=GraphStats(turns=view.turns, concepts=view.concepts),
        timings=Timings(
            extract_ms=_ms(started, extracted), spread_ms=_ms(extracted, spread_done),
            rank_ms=_ms(spread_done, finished), total_ms=_ms(started, finished),
        ),
        unmatched=tuple(seeds.unmatched),
        expanded=tuple(seeds.expanded),
        empty=None if ranked else ("no_seeds" if not seeds.groups else "no_passages"),
    )


def _texts(state: PartitionState, view: GraphView) -> Texts:
    return lambda turn_ids: [p.text for p in state.repo.passages(view.ref, turn_ids).values()]


DATE_DEPTH = 200  # how deep the ranking goes for a question that names its time (`within`)


def within(
    ranked: list[tuple[str, float]], times: dict[str, datetime], when: dates.Window, boost: float
) -> list[tuple[str, float]]:
    """`ranked` again, a passage said within `when` scoring (1 + boost) ×
    (ties by passage id): "What did Maria donate in December 2023?" is
    answered by what she said then, which may share only her name with the
    question."""
    lifted = [(pid, score * (1.0 + boost) if pid in times and when.holds(times[pid]) else score)
              for pid, score in ranked]
    return sorted(lifted, key=lambda item: (-item[1], item[0]))


FUSION_DEPTH = 50  # how deep each question's ranking goes into `fuse_questions`


def _scored(view: GraphView, activation: np.ndarray, params: ActivationParams) -> tuple[np.ndarray, list[int]]:
    """Concept scores of an activation, and its top concepts (indices)."""
    scores = concept_scores(activation, view.specificity(), params.hub_floor)
    return scores, top_concepts(scores, activation, params.top_concepts, view.ids)


def _ranked(
    view: GraphView, scores: np.ndarray, top: list[int], params: ActivationParams, named: frozenset[str], depth: int,
    seeds: set[int], alias_of: dict[int, int],
) -> list[tuple[str, float]]:
    """The `depth` best passages of the `top` concepts, placed in their
    conversation (`seeds`: the concepts the question started from; a name
    in `alias_of` adds nothing to the passages of the thing it names)."""
    added = seeded_scores(scores, top, seeds, params.association_weight)
    return rank_passages(((score, _passages(view, i, alias_of)) for score, i in added), depth, view.surroundings(),
                         params, named)


def _passages(view: GraphView, i: int, alias_of: dict[int, int]) -> list[str]:
    thing = alias_of.get(i)
    if thing is None:
        return view.passage_ids[i]
    told = set(view.passage_ids[thing])
    return [pid for pid in view.passage_ids[i] if pid not in told]


def _ms(a: float, b: float) -> float:
    return round((b - a) * 1000.0, 3)


def reinforcement(
    state: PartitionState, query: ActivationQuery, reply: ActivationReply, params: GraphParams
) -> Retrieved | None:
    """The `retrieved` event of an answer: each seed (activation 1 when the
    spreading started) and each returned concept gets retrieval_boost ·
    min(1, activation), at the query's `at` or else the graph's latest event
    time. None when the query asks for no reinforcement or nothing was activated."""
    view = state.view(query.graph_id, query.graph_version)
    if not query.reinforce or view is None or params.retrieval_boost == 0:
        return None
    activated = {c.id: min(1.0, c.activation) for c in reply.concepts if c.activation > 0}
    activated.update({seed: 1.0 for seed in reply.seeds})
    boosts = tuple(
        Boost(id=cid, amount=on_grid(params.retrieval_boost * a)) for cid, a in sorted(activated.items())
    )
    at = query.at or state.repo.meta(view.ref).clock
    if not boosts or at is None:
        return None
    return Retrieved(
        graph_id=query.graph_id, graph_version=view.ref.version, request_id=query.request_id,
        timestamp=at, boosts=boosts,
    )


MAX_PASSAGES_FOUND = 1000  # by one turn id prefix


def held_passages(state: PartitionState, query: PassageQuery) -> PassagesReply:
    """The passages of `query.turn_ids` the graph version holds, and the ids it does not."""
    view = state.view(query.graph_id, query.graph_version)
    if view is None:
        raise QueryError("graph_not_found", f"graph {query.graph_id!r} has no turns on this worker")
    found = state.repo.passages(view.ref, list(query.turn_ids))
    if query.turn_id_prefix is not None:
        found |= state.repo.passages_starting(view.ref, query.turn_id_prefix, MAX_PASSAGES_FOUND)
    return PassagesReply(
        request_id=query.request_id, graph_id=query.graph_id, version=view.ref.version,
        passages=tuple(
            HeldPassage(turn_id=p.turn_id, speaker=p.speaker, text=p.text, timestamp=p.timestamp,
                        session_id=p.session_id, metadata=p.metadata, concepts=p.concept_ids)
            for p in found.values()
        ),
        missing=tuple(t for t in query.turn_ids if t not in found),
    )


def graph_stats(state: PartitionState, query: StatsQuery) -> StatsReply:
    """Sizes of a graph version from its view, and its `top` most mentioned concepts."""
    view = state.view(query.graph_id, query.graph_version)
    if view is None:
        raise QueryError("graph_not_found", f"graph {query.graph_id!r} has no turns on this worker")
    ids = [view.ids[i] for i in view.most_mentioned(query.top)]
    records = state.repo.concepts(view.ref, ids)
    return StatsReply(
        request_id=query.request_id, graph_id=query.graph_id, version=view.ref.version, turns=view.turns,
        concepts=view.concepts, edges=view.edges, passages=len(view.place_of), topics=len(view.topics),
        top_concepts=tuple(
            TopConcept(id=c, text=records[c].text, count=records[c].count, base_activation=records[c].base_activation)
            for c in ids
        ),
    )
