"""The one codec: events to JSON bytes and back.

Decoding never raises anything but `DecodeError`, whose `code` names the
reason (for the dead-letter topic and error replies). Old schema versions
are upcast to the current shape before validation, never reinterpreted.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any, Callable, TypeVar

from pydantic import BaseModel, TypeAdapter, ValidationError

from emgas.processors.errors import DecodeError
from emgas.processors.sealing import SEALED_PREFIX, sealed_header
from emgas.processors.events import (
    MAX_TEXT_BYTES,
    ActivationQuery,
    Event,
    DigestQuery,
    GraphEvent,
    PassageQuery,
    Reply,
    StatsQuery,
    Turn,
)

M = TypeVar("M", bound=BaseModel)
Upcaster = Callable[[dict[str, Any]], dict[str, Any]]

def _versioned(model: type[BaseModel]) -> list[type[BaseModel]]:
    """`model` and its subclasses that carry a `type` and a `schema_version`."""
    found = [model] if {"type", "schema_version"} <= set(model.model_fields) else []
    return found + [m for sub in model.__subclasses__() for m in _versioned(sub)]


# Current schema version of each event type: what each model's literals say.
CURRENT_VERSIONS: dict[str, int] = {
    m.model_fields["type"].default: m.model_fields["schema_version"].default for m in _versioned(Event)
}


def _unversioned_graph(obj: dict[str, Any]) -> dict[str, Any]:
    """v1 -> v2 of turn_ingested and activation_query: graph versions came in
    with v2, and every v1 event meant the graph's active version."""
    return {**obj, "graph_version": None}


def _reinforcing(obj: dict[str, Any]) -> dict[str, Any]:
    """v2 -> v3 of activation_query: reinforcement by retrieval came in with
    v3; a v2 query is answered as every query now is, reinforcing, at the
    graph's latest event time."""
    return {**obj, "reinforce": True, "at": None}


def _no_reason_given(obj: dict[str, Any]) -> dict[str, Any]:
    """activation_reply v1 → v2: a v1 reply said nothing of unmatched words,
    expansions or why it was empty; v2's defaults (none) say the same."""
    return obj


def _pair_layout(obj: dict[str, Any]) -> dict[str, Any]:
    """snapshot v1 -> v2: the layout of the records became a field; every v1
    snapshot holds one record per pair and per link ("pairs")."""
    return {**obj, "layout": "pairs"}


def _zlib_compressed(obj: dict[str, Any]) -> dict[str, Any]:
    """snapshot v2 -> v3: the compression of the records became a field;
    every v1 and v2 snapshot is compressed by zlib."""
    return {**obj, "compression": "zlib"}


# (type, version) -> function turning that version's dict into version + 1.
UPCASTERS: dict[tuple[str, int], Upcaster] = {
    ("turn_ingested", 1): _unversioned_graph,
    ("activation_query", 1): _unversioned_graph,
    ("activation_query", 2): _reinforcing,
    ("activation_reply", 1): _no_reason_given,
    ("snapshot", 1): _pair_layout,
    ("snapshot", 2): _zlib_compressed,
}

_GRAPH_EVENT = TypeAdapter(GraphEvent)
_REPLY = TypeAdapter(Reply)


def encode(event: BaseModel) -> bytes:
    """Serialise an event as compact UTF-8 JSON."""
    return event.model_dump_json().encode()


def _load_object(raw: bytes | None) -> dict[str, Any]:
    if not raw:  # b"", or None: a record without a value
        raise DecodeError("empty", "message has no value")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DecodeError("not_utf8", f"message is not UTF-8: {exc}") from None
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DecodeError("not_json", f"message is not JSON: {exc}") from None
    except RecursionError:
        raise DecodeError("not_json", "message is nested too deeply") from None
    if not isinstance(obj, dict):
        raise DecodeError("not_object", "message must be a JSON object")
    return obj


def upcast(obj: dict[str, Any]) -> dict[str, Any]:
    """Bring an event dict to its type's current schema version.

    The version defaults to the current one when absent (hand-written input).
    """
    kind = obj.get("type")
    if not isinstance(kind, str) or kind not in CURRENT_VERSIONS:
        raise DecodeError("unknown_type", f"unknown event type {kind!r}")
    current = CURRENT_VERSIONS[kind]
    version = obj.get("schema_version", current)
    if not isinstance(version, int) or isinstance(version, bool) or not 1 <= version <= current:
        raise DecodeError(
            "unknown_version", f"{kind} schema_version {version!r} is not in 1..{current}"
        )
    while version < current:
        obj = UPCASTERS[(kind, version)](obj)
        version += 1
    return {**obj, "schema_version": current}


def _validate(model: Callable[[dict[str, Any]], M], obj: dict[str, Any]) -> M:
    try:
        return model(obj)
    except ValidationError as exc:
        code = "timestamp_out_of_range" if exc.errors()[0]["type"] == "timestamp_out_of_range" else "invalid_fields"
        raise DecodeError(code, _describe(exc)) from None


def _describe(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors()[:5]:
        where = ".".join(str(p) for p in err["loc"]) or "(message)"
        parts.append(f"{where}: {err['msg']}")
    return "; ".join(parts)


def _user_event(obj: dict[str, Any], kind: str, model: type[M]) -> M:
    obj.setdefault("type", kind)
    if obj["type"] != kind:
        raise DecodeError("unknown_type", f"expected type {kind!r}, got {obj['type']!r}")
    return _validate(model.model_validate, upcast(obj))


def decode_turn(raw: bytes, now: datetime | None = None, max_future_s: float = 86_400.0) -> Turn:
    """Read a turn from `emgas.turns`; `type` and `schema_version` are optional.

    With `now` (the receiver's clock), a timestamp more than `max_future_s`
    ahead of it is refused: it would move the graph's clock, and its decay
    ticks, into the future. Timestamps outside 1970..2199 are always refused.
    """
    turn = _user_event(_load_object(raw), "turn", Turn)
    if len(turn.text.encode()) > MAX_TEXT_BYTES:
        raise DecodeError("text_too_long", f"text is over {MAX_TEXT_BYTES} bytes")
    if now is not None and (turn.timestamp - now).total_seconds() > max_future_s:
        raise DecodeError(
            "timestamp_out_of_range",
            f"timestamp {turn.timestamp.isoformat()} is more than {max_future_s:g} s ahead of the receiver's clock",
        )
    return turn


def _query(obj: dict[str, Any]) -> ActivationQuery:
    query = _user_event(obj, "activation_query", ActivationQuery)
    if query.text is None and not query.seeds:
        raise DecodeError("invalid_fields", "a query needs `text` or `seeds`")
    return query


def decode_query(raw: bytes) -> ActivationQuery:
    """Read an activation query; `type` and `schema_version` are optional."""
    return _query(_load_object(raw))


def decode_request(raw: bytes) -> ActivationQuery | DigestQuery | StatsQuery | PassageQuery:
    """Read anything `emgas.queries` carries: an activation query (the
    default when `type` is absent), a digest, stats or passage query."""
    obj = _load_object(raw)
    if obj.get("type") == "passage_query":
        return _validate(PassageQuery.model_validate, upcast(obj))
    if obj.get("type") == "digest_query":
        return _validate(DigestQuery.model_validate, upcast(obj))
    if obj.get("type") == "stats_query":
        return _validate(StatsQuery.model_validate, upcast(obj))
    return _query(obj)


def decode_graph_event(raw: bytes | None) -> GraphEvent:
    """Read a graph event (any schema version we ever wrote) in its current shape.

    An event written in its type's current schema version (what workers
    write) is validated straight from its bytes; anything else (an older
    version to upcast, or bytes that do not validate) takes the general
    path, which refuses a bad event with its one-line reason (a record
    without a value too: `empty`). A sealed record is read as its envelope
    (`processors.sealing`: its first line)."""
    if raw and raw.startswith(SEALED_PREFIX):
        raw = sealed_header(raw)
    if raw:
        try:
            return _GRAPH_EVENT.validate_json(raw)
        except ValidationError:
            pass
    return _validate(_GRAPH_EVENT.validate_python, upcast(_load_object(raw)))


def decode_reply(raw: bytes) -> Reply:
    return _validate(_REPLY.validate_python, upcast(_load_object(raw)))
