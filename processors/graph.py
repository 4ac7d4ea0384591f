"""The graph state: its records, and how a mention or a retrieval changes a concept.

Pure functions of their arguments (no clock: times come from the events),
used by `processors.evolve`, which applies whole events.
"""

from __future__ import annotations

from datetime import datetime
from functools import lru_cache
from typing import Iterable, Mapping, NamedTuple, TypeVar

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from emgas.processors.dynamics import DAY_S, DecayParams, decay_factor, window_index, window_start
from emgas.processors.events import MAX_BOOST, Concept, MetadataValue
from emgas.processors.topics import TopicParams


# Activation increments are rounded to multiples of 2^-32, so sums of them
# are exact in float64 (below 2^20) and thus independent of the order in
# which turns are applied: the same turns give bit-identical graphs.
ACTIVATION_GRID = 2.0**-32


def on_grid(x: float) -> float:
    """x rounded to the nearest multiple of ACTIVATION_GRID (unitless)."""
    return round(x / ACTIVATION_GRID) * ACTIVATION_GRID


_Model = TypeVar("_Model", bound=BaseModel)


class GraphRef(NamedTuple):
    """One version of a graph. Versions other than 1 come from re-derivation."""

    graph_id: str
    version: int

    def __str__(self) -> str:
        return f"{self.graph_id} v{self.version}"


class GraphParams(BaseModel):
    """Parameters of applying graph events."""

    model_config = ConfigDict(frozen=True)  # field docstrings: the settings reference (tools.reference reads them)

    mention_boost: float = Field(default=1.0, ge=0.0)
    """A repeated mention adds mention_boost · importance to base activation."""
    retrieval_boost: float = Field(default=0.5, ge=0.0, le=MAX_BOOST)
    """A retrieval adds retrieval_boost · min(1, activation) to each concept it returns."""
    window_s: float = Field(default=3600.0, ge=0.0)
    """A decay tick each time a graph's event-time clock crosses into a new window of this length, seconds (0: no ticks)."""
    consolidate_every_s: float = Field(default=86_400.0, ge=0.0)
    """A consolidation (topic nodes) each time a graph's event-time clock crosses into a new window of this length,
    seconds (0: none)."""
    idle_check_s: float = Field(default=60.0, ge=0.0)
    """An idle graph's clock moves on at wall-clock speed from its last event (see `service.scheduler`); checked this
    often, in wall seconds (0: never)."""
    decay: DecayParams = DecayParams()
    """Forgetting: how concepts and edges decay and when they are pruned (…__DECAY__*)."""
    topics: TopicParams = TopicParams()
    """Consolidation into topic nodes (…__TOPICS__*)."""


class ConceptState(BaseModel):
    """A concept node. `count` = turns mentioning it; activation is unitless.

    `base_activation` is the value as of `decay_reference` (`decayed_to`
    when set, else `created_at`). Every contribution (a mention's boost, a
    retrieval's) is added as of that reference: one from an earlier decay
    window is first decayed from its own event time to the reference, one
    from the same window counts as simultaneous, one from a later window is
    taken as of the reference, and one more than two windows later first
    brings the concept forward to the start of its own window
    (`with_contribution`). So an old event can add to a concept but never
    ages it: the reference never moves back across a window.

    What an event older than the fields below does to each of them:

    - `created_at`: the earliest mention's event time (min), a record of
      history; it is the decay reference only while `decayed_to` is None,
      and an older mention from an earlier window pins `decayed_to` first.
    - `last_accessed`: the newest mention or retrieval (max): never moved back.
    - `decayed_to`: the event time `base_activation` is as of, once it is not
      `created_at`: the last decay tick it was brought to, the start of the
      window a far newer contribution brought it to, or the reference an
      older contribution found. Moves forward only.
    - `retrievals`, `first_retrieved`, `last_retrieved` (for the extraction
      frequency, `retrieval_frequency`): how many
      retrievals reinforced it, the earliest and the newest (min / max).
    """

    model_config = ConfigDict(frozen=True)

    id: str
    text: str
    count: int
    base_activation: float
    created_at: AwareDatetime
    last_accessed: AwareDatetime
    decayed_to: AwareDatetime | None = None
    retrievals: int = 0
    first_retrieved: AwareDatetime | None = None
    last_retrieved: AwareDatetime | None = None

    @property
    def reinforcements(self) -> int:
        """Mentions + retrievals: what moves a concept to the slow (power-law) decay."""
        return self.count + self.retrievals

    @property
    def decay_reference(self) -> datetime:
        """The event time `base_activation` is as of."""
        return self.decayed_to or self.created_at

    def retrieval_frequency(self) -> float | None:
        """Extraction frequency f = n / T in retrievals per day (how often a
        memory is recalled, as `emgas explain` shows it), T =
        time from the first to the last retrieval; None before two distinct times."""
        if self.first_retrieved is None or self.last_retrieved is None:
            return None
        span = (self.last_retrieved - self.first_retrieved).total_seconds()
        return self.retrievals / (span / DAY_S) if span > 0 else None


class GraphMeta(BaseModel):
    """Totals and clocks of one graph version.

    `turns` = N, the observations behind PPMI. What an older event does:

    - `first_seen`: the earliest event time of its turns (min): an imported
      older turn moves it back (it only places the first decay window of a
      graph that has never ticked).
    - `clock`: the newest event time of its turns (max): never moved back,
      so an old turn starts no decay window.
    - `decayed_to` and `decay`: the last decay tick applied and its
      parameters (a contribution brings its concept to that tick before
      adding); a tick not later than it is a duplicate and changes nothing.
    - `consolidated_to`: the last consolidation, likewise.
    """

    model_config = ConfigDict(frozen=True)

    turns: int = 0
    first_seen: AwareDatetime | None = None
    clock: AwareDatetime | None = None
    decayed_to: AwareDatetime | None = None
    decay: DecayParams | None = None
    consolidated_to: AwareDatetime | None = None


class Passage(BaseModel):
    """A source passage (one turn), the concepts it mentioned and its place in the conversation.

    `timestamp` is the turn's own event time, whatever its arrival. `seq`
    is its place in log order: a turn imported later with an old timestamp
    comes after the turns already applied, so "the turns around it" (the
    session step of retrieval) are its own session's turns in arrival order.
    """

    model_config = ConfigDict(frozen=True)

    turn_id: str
    speaker: str
    text: str
    timestamp: AwareDatetime
    session_id: str | None = None
    metadata: dict[str, MetadataValue] = Field(default_factory=dict)
    concept_ids: tuple[str, ...]
    # Position among the graph version's turns, in log order (0-based): with
    # session_id, what makes turns neighbours in a conversation.
    seq: int = 0


def brought_to_tick(concept: ConceptState, meta: GraphMeta) -> ConceptState:
    """The concept decayed to the graph's last tick, if it is behind it:
    A = on_grid(A · factor(t_tick − t_ref)) with the tick's parameters
    (`processors.dynamics.decay_factor`), decayed_to = t_tick."""
    tick, params = meta.decayed_to, meta.decay
    if tick is None or params is None or concept.decay_reference >= tick:
        return concept
    return _decayed_to(concept, tick, params)


def _decayed_to(concept: ConceptState, at: datetime, params: DecayParams) -> ConceptState:
    """A = on_grid(A · factor(at − t_ref)), decayed_to = at (at later than t_ref)."""
    elapsed = (at - concept.decay_reference).total_seconds()
    factor = decay_factor(elapsed, concept.reinforcements, params)
    return concept.model_copy(update={"base_activation": on_grid(concept.base_activation * factor), "decayed_to": at})


def activation_at(concept: ConceptState, at: datetime, params: DecayParams) -> float:
    """Base activation at event time `at`: A · factor(at − t_ref) (unitless)."""
    elapsed = (at - concept.decay_reference).total_seconds()
    return concept.base_activation * decay_factor(elapsed, concept.reinforcements, params)


# A contribution this many decay windows or more after its concept's
# reference brings the concept forward first. A worker ticks each window
# its graph's clock enters, so in the logs it writes a contribution is at
# most one window ahead; one more window of slack keeps logs written with
# ticks off (the golden log) folding as they always did.
FORWARD_WINDOWS = 2


def with_contribution(
    concept: ConceptState, amount: float, at: datetime, meta: GraphMeta, params: GraphParams, forward_to: datetime
) -> ConceptState:
    """A contribution of `amount` (unitless) made at event time `at`, added to
    A as of the concept's reference t_ref, after bringing it to the graph's
    last tick. With W = `params.window_s` and ws(t) the start of t's window:

    - ws(at) < ws(t_ref) (an older event): A + on_grid(amount · factor(t_ref − at)),
      t_ref kept (pinned in `decayed_to`);
    - ws(at) − t_ref > FORWARD_WINDOWS · W (the graph's clock jumped over
      windows no tick covered): first A = on_grid(A · factor(t1 − t_ref)),
      t_ref = t1 = ws(min(at, forward_to)), then + on_grid(amount);
    - otherwise (the same window, or a later one within FORWARD_WINDOWS:
      its tick is on its way): A + on_grid(amount), so the turns of one
      window fold to the same value in any order.

    W = 0 (no windows): older means at < t_ref, and nothing is brought forward.
    The decay model is the graph's last tick's, or the configured one before any.
    """
    activation, decayed_to = _contributed(concept, amount, at, meta, params, forward_to)
    return replaced(concept, {"base_activation": activation, "decayed_to": decayed_to})


def _contributed(
    concept: ConceptState, amount: float, at: datetime, meta: GraphMeta, params: GraphParams, forward_to: datetime
) -> tuple[float, datetime | None]:
    """(A, decayed_to) after `with_contribution`."""
    return contributed(
        concept.base_activation, concept.decayed_to, concept.created_at, concept.count + concept.retrievals,
        amount, at, meta, params, forward_to,
    )


def contributed(
    activation: float, decayed_to: datetime | None, created_at: datetime, reinforcements: int,
    amount: float, at: datetime, meta: GraphMeta, params: GraphParams, forward_to: datetime,
) -> tuple[float, datetime | None]:
    """(A, decayed_to) of a concept (A = `activation` as of `decayed_to` or
    `created_at`) after `with_contribution` of `amount`, computed on the
    values (a fold calls it for every concept of every turn)."""
    ref = decayed_to or created_at
    tick, tick_params = meta.decayed_to, meta.decay
    if tick is not None and tick_params is not None and ref < tick:  # `brought_to_tick`
        activation = on_grid(activation * decay_factor((tick - ref).total_seconds(), reinforcements, tick_params))
        decayed_to = ref = tick
    window_s, decay = params.window_s, meta.decay or params.decay
    if window_s > 0:
        at_window, ref_window = _window_index(at, window_s), _window_index(ref, window_s)
        older = at_window < ref_window
    else:
        older = at < ref
    if older:
        factor = decay_factor((ref - at).total_seconds(), reinforcements, decay)
        return activation + on_grid(amount * factor), ref
    if window_s > 0:
        forward = min(at, forward_to)
        # ws(forward) − t_ref ≤ (windows apart) · W: fewer than FORWARD_WINDOWS
        # windows apart can never exceed FORWARD_WINDOWS · W, so only then
        # is the exact difference taken.
        if _window_index(forward, window_s) - ref_window >= FORWARD_WINDOWS:
            target = window_start(forward, window_s)
            elapsed = (target - ref).total_seconds()
            if elapsed > FORWARD_WINDOWS * window_s:
                activation = on_grid(activation * decay_factor(elapsed, reinforcements, decay))
                decayed_to = target
    return activation + on_grid(amount), decayed_to


@lru_cache(maxsize=4096)  # the turns of a window share their times' windows
def _window_index(t: datetime, window_s: float) -> int:
    """`window_index`, cached."""
    return window_index(t, window_s)


def replaced(model: _Model, update: dict, names: frozenset[str] | None = None) -> _Model:
    """`model.model_copy(update=update)` for values already valid, of a
    model with no extra fields and no private attributes (`ConceptState`,
    `GraphMeta`), without pydantic's copy machinery (about 4 times faster;
    equal result). `names`: the update's keys, when the caller has them as a set."""
    fields = model.__dict__.copy()
    fields.update(update)
    new = _new_concept(type(model))
    _set(new, "__dict__", fields)
    _set(new, "__pydantic_fields_set__", model.__pydantic_fields_set__ | (names or set(update)))
    _set(new, "__pydantic_extra__", None)
    _set(new, "__pydantic_private__", None)
    return new



_new_concept = object.__new__
_set = object.__setattr__
_NEW_FIELDS = frozenset({"id", "text", "count", "base_activation", "created_at", "last_accessed"})
_MENTIONED = frozenset({"base_activation", "decayed_to", "text", "count", "created_at", "last_accessed"})


class Mentions:
    """Concepts of one graph version mentioned by a run of turns, kept as
    plain values while the run is folded (`mention`) and made records once
    at its end (`records`): what `concept_after_mention` gives after each
    mention in turn, without a record per mention. Values per concept:
    [text, count, base_activation, created_at, last_accessed, decayed_to,
    retrievals, first_retrieved, last_retrieved]."""

    def __init__(self, held: Mapping[str, list], meta: GraphMeta, params: GraphParams) -> None:
        """`held`: the values of the concepts stored before the run
        (`concept_values`); read, never changed."""
        self._values: dict[str, list] = {}
        self._held, self._meta, self._params = held, meta, params

    def ticked(self, meta: GraphMeta) -> None:
        """A tick that lists nothing, inside the run: the mentions after it
        read `meta` (its last tick and decay parameters)."""
        self._meta = meta

    def mention(self, cid: str, text: str, importance: float, at: datetime) -> None:
        """`concept_after_mention` of the concept's values so far (the meta
        carries the graph's last tick: `ticked` moves it)."""
        values = self._values.get(cid)
        if values is None:
            old = self._held.get(cid)
            if old is None:
                self._values[cid] = [text, 1, on_grid(importance), at, at, None, 0, None, None]
                return
            values = self._values[cid] = list(old)
        params = self._params
        old_text, count, _, created_at, _, _, retrievals, _, _ = values
        values[2], values[5] = contributed(
            values[2], values[5], created_at, count + retrievals, params.mention_boost * importance, at,
            self._meta, params, at,
        )
        if (at, text) < (created_at, old_text):  # the earliest mention's surface text (ties: the smallest)
            values[0] = text
        values[1] = count + 1
        if at < created_at:
            values[3] = at
        if at > values[4]:
            values[4] = at

    def turn(self, concepts: Iterable[Concept], at: datetime) -> None:
        """`mention` of each of a turn's concepts, at event time `at`, in its order."""
        for concept in concepts:
            self.mention(concept.id, concept.text, concept.importance, at)

    def values(self) -> dict[str, list]:
        """Every concept mentioned, as its values after the run's last mention of it."""
        return self._values

    def records(self) -> dict[str, ConceptState]:
        """Every concept mentioned, as its record after the run's last mention of it."""
        return {cid: concept_record(cid, values) for cid, values in self._values.items()}


def concept_values(concept: ConceptState) -> list:
    """The concept's fields in `Mentions`' order (without the id)."""
    return [
        concept.text, concept.count, concept.base_activation, concept.created_at, concept.last_accessed,
        concept.decayed_to, concept.retrievals, concept.first_retrieved, concept.last_retrieved,
    ]


def concept_record(cid: str, values: list) -> ConceptState:
    """A `ConceptState` from `Mentions` values already valid, without validating them again."""
    text, count, activation, created_at, last_accessed, decayed_to, retrievals, first, last = values
    new = _new_concept(ConceptState)
    _set(new, "__dict__", {
        "id": cid, "text": text, "count": count, "base_activation": activation, "created_at": created_at,
        "last_accessed": last_accessed, "decayed_to": decayed_to, "retrievals": retrievals,
        "first_retrieved": first, "last_retrieved": last,
    })
    _set(new, "__pydantic_fields_set__", set(_NEW_FIELDS) | _MENTIONED if count > 1 else set(_NEW_FIELDS))
    _set(new, "__pydantic_extra__", None)
    _set(new, "__pydantic_private__", None)
    return new


def concept_after_mention(
    old: ConceptState | None,
    cid: str,
    text: str,
    importance: float,
    at: datetime,
    params: GraphParams,
    meta: GraphMeta,
) -> ConceptState:
    """New node: A = importance. Repeated mention: `with_contribution` of
    boost · importance at `at` (each term on ACTIVATION_GRID, so sums do not
    depend on the order of turns within a window), count + 1, created_at =
    min(created_at, at), last_accessed = max(last_accessed, at) (event time,
    not wall clock); the surface text is that of the earliest mention
    (ties: the smallest text). One mention of `Mentions`."""
    mentions = Mentions({} if old is None else {cid: concept_values(old)}, meta, params)
    mentions.mention(cid, text, importance, at)
    return mentions.records()[cid]


def concept_after_retrieval(
    old: ConceptState, amount: float, at: datetime, meta: GraphMeta, params: GraphParams
) -> ConceptState:
    """Reinforcement by retrieval at `at`: `with_contribution` of `amount`
    (never brought forward past the graph's clock: a query's wall time may
    be far ahead of a conversation's event time), retrievals + 1,
    first/last retrieval = min/max with `at`, last_accessed = max."""
    activation, decayed_to = _contributed(old, amount, at, meta, params, meta.clock or at)
    return replaced(
        old,
        {
            "base_activation": activation,
            "decayed_to": decayed_to,
            "retrievals": old.retrievals + 1,
            "first_retrieved": min(old.first_retrieved or at, at),
            "last_retrieved": max(old.last_retrieved or at, at),
            "last_accessed": max(old.last_accessed, at),
        },
    )
