"""Records encoded and decoded without their models.

Encoded: orjson, byte for byte what pydantic's `model_dump_json` writes
for the same fields (compact, fields in declaration order, UTF-8, floats
as their shortest round trip, aware datetimes in ISO 8601 with `Z` for
UTC: `tests/unit/state/test_records.py`). The fold writes thousands of concept
and passage records per commit; encoding each from its plain values skips
building a model first.

Decoded (`decode_concept`, `decode_passage_place`): what loading a graph's view
reads of its concept and passage records, with msgspec, each value what
the model would hold, or None where a record is not in the form the
encoder writes (the caller validates its model then, which refuses it
with its reason if it is invalid). Loading a view reads every record of
the version: as models, most of a takeover's first query.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Iterable

import msgspec
import orjson

from emgas.processors.fold_codec import canonical_time

_OPTIONS = orjson.OPT_UTC_Z


def dumps(fields: dict[str, Any]) -> bytes | None:
    """`fields` as a record's JSON; None where orjson cannot write a value
    as pydantic would (an integer beyond 64 bits in metadata, a string that
    is not valid Unicode): the caller encodes its model then."""
    try:
        return orjson.dumps(fields, option=_OPTIONS)
    except (orjson.JSONEncodeError, TypeError):
        return None


def dumps_flat(records: list[dict[str, Any]], first: str) -> list[bytes | None]:
    """`dumps` of each of `records`, written by one orjson call and cut
    apart: each record's first field is named `first` and no value is an
    object or an array (a concept record), so `},{"` + first + `":` occurs
    between two records and nowhere else (a quote inside a string is
    escaped). orjson costs about 5 µs a call here; one call for 29,000
    records about 1 µs each."""
    if not records:
        return []
    try:
        whole = orjson.dumps(records, option=_OPTIONS)
    except (orjson.JSONEncodeError, TypeError):
        return [dumps(fields) for fields in records]
    head = b'{"' + first.encode() + b'":'
    pieces = whole[1:-1].split(b"}," + head)
    if len(pieces) != len(records):  # a value that is not flat: never from the fold's records
        return [dumps(fields) for fields in records]
    pieces[0] = pieces[0][len(head):]
    pieces[-1] = pieces[-1][:-1]
    return [head + piece + b"}" for piece in pieces]


class _ConceptOut(msgspec.Struct, gc=False):
    """A concept record's fields in `ConceptState`'s order, to be written."""

    id: str
    text: str
    count: int
    base_activation: float
    created_at: datetime
    last_accessed: datetime
    decayed_to: datetime | None
    retrievals: int
    first_retrieved: datetime | None
    last_retrieved: datetime | None


_ENCODER = msgspec.json.Encoder()
# msgspec writes a float of 10^16 or more as `1e16`, pydantic (and orjson) as
# `1e+16`; below that they write the same shortest form (10^6 random
# doubles and every decade down to 10^-324 compared). Strings, integers,
# None and aware datetimes (µs, offsets, `Z` for UTC) are written alike.
PLAIN_FLOATS_BELOW = 1e16


def dumps_concepts(values: Iterable[tuple]) -> list[bytes] | None:
    """Each of `values` (a concept's id and its `Mentions` values, every
    float below PLAIN_FLOATS_BELOW in magnitude) as its record's JSON, a
    msgspec struct each (about a third of `dumps_flat`'s time); None where
    msgspec cannot write one (a string that is not valid Unicode)."""
    encode, row = _ENCODER.encode, _ConceptOut
    try:
        return [encode(row(*one)) for one in values]
    except (msgspec.EncodeError, UnicodeEncodeError, OverflowError):
        return None


class _ConceptWire(msgspec.Struct, gc=False):
    """A concept record's fields (`ConceptState`), its times as written."""

    id: str
    text: str
    count: int
    base_activation: float
    created_at: str
    last_accessed: str
    decayed_to: str | None = None
    retrievals: int = 0
    first_retrieved: str | None = None
    last_retrieved: str | None = None


class PassagePlace(msgspec.Struct, gc=False):
    """What a view reads of a passage record (`Passage`): its place in the
    conversation and the concepts it names."""

    turn_id: str
    speaker: str
    concept_ids: list[str]
    session_id: str | None = None
    seq: int = 0


class _PassageConcepts(msgspec.Struct, gc=False):
    """What a tick reads of a passage record: the concepts it names (the
    other fields skipped, not made into objects)."""

    concept_ids: tuple[str, ...]


_CONCEPT = msgspec.json.Decoder(_ConceptWire)
_PASSAGE_CONCEPTS = msgspec.json.Decoder(_PassageConcepts)
_PASSAGE = msgspec.json.Decoder(PassagePlace)


def decode_concept(raw: bytes) -> tuple[str, list] | None:
    """(id, `Mentions`' values: text, count, activation, created_at,
    last_accessed, decayed_to, retrievals, first_retrieved, last_retrieved)
    of a concept record; None where it is not as the encoder writes it."""
    try:
        wire = _CONCEPT.decode(raw)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    created, last = _record_time(wire.created_at), _record_time(wire.last_accessed)
    decayed, first, latest = _time(wire.decayed_to), _time(wire.first_retrieved), _time(wire.last_retrieved)
    if created is None or last is None or decayed is False or first is False or latest is False:
        return None
    return wire.id, [wire.text, wire.count, wire.base_activation, created, last, decayed, wire.retrievals, first, latest]


def _time(value: str | None) -> datetime | None | bool:
    """A nullable time field: None, its datetime, or False where it is not canonical."""
    if value is None:
        return None
    at = _record_time(value)
    return False if at is None else at


def _record_time(value: str) -> datetime | None:
    """`canonical_time`, remembered: the concepts of a graph share half of
    their times (those mentioned in one turn, retrieved by one query), and
    one datetime for each lets `repository.to_us` convert it once."""
    at = _TIMES.get(value, _UNSEEN)
    if at is _UNSEEN:
        if len(_TIMES) >= _TIMES_MAX:
            _TIMES.clear()
        at = _TIMES[value] = canonical_time(value)
    return at


_UNSEEN: Any = object()
_TIMES: dict[str, datetime | None] = {}  # a race between threads writes an equal value
_TIMES_MAX = 1 << 14


def decode_passage_concepts(raw: bytes) -> tuple[str, ...] | None:
    """The concepts a passage record names; None where it is not as the encoder writes it."""
    try:
        return _PASSAGE_CONCEPTS.decode(raw).concept_ids
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None


def decode_passage_place(raw: bytes) -> PassagePlace | None:
    """A passage record's place and concepts; None where it is not as the encoder writes it."""
    try:
        return _PASSAGE.decode(raw)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
