"""Sealing: a graph event's words in the log under a data key of its own.

A turn's `turn_ingested` event (its text, speaker, metadata and concepts)
and each part of a snapshot (a graph's passages and concept names) are
written to `emgas.graph-events` as a `sealed` event: a clear envelope (the
graph, which key, the event time) around the event's own bytes encrypted
with AES-256-GCM under a data key used for that turn, or that snapshot,
only. The data keys live in a compacted topic, in key sets (a graph's
turns sealed together, or one snapshot: one record each) encrypted under
the operator's key-encryption key; forgetting a turn writes its key set
again without its key (or a tombstone, when none is left), and once Kafka
has compacted the set's older versions away the sealed bytes are
unreadable anywhere: what crypto-shredding promises.

Opening gives back exactly the bytes that were sealed, so the fold, its
journal and every digest see what an unsealed log holds. Everything here
is pure: the keys and nonces come from the caller.

The associated data binds a ciphertext to its envelope (graph, key id and
what it holds), so an envelope moved to another graph or turn does not
open.
"""

from __future__ import annotations

import hashlib
import struct
from dataclasses import dataclass, field
from typing import Literal

import orjson
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

KEY_BYTES = 32  # AES-256: data keys and the key-encryption key
NONCE_BYTES = 12  # AES-GCM's standard nonce
SEALED_PREFIX = b'{"type":"sealed"'
SealedType = Literal["turn_ingested", "snapshot"]
_AAD = "emgas sealed v1"
_KEY_RECORD_VERSION = b"\x01"
_KEY_RECORD_HEAD = 1 + 8 + NONCE_BYTES  # version, fingerprint, nonce
_ENTRY_LENGTH = struct.Struct(">H")


class SealError(ValueError):
    """A sealed record or key record that does not open: tampered with,
    truncated, or sealed under another key."""


class Envelope:
    """What a sealed event shows in clear: its graph, its key's id within
    the graph (`turn/<batch>.<n>/<turn id>`, `snapshot/<offset>/<tag>`),
    what it holds and the sealed event's time. (A plain class with slots:
    one is made per sealed record read, and a frozen dataclass's
    construction costs a microsecond more.)"""

    __slots__ = ("graph_id", "key_id", "sealed_type", "timestamp", "_key")

    def __init__(self, graph_id: str, key_id: str, sealed_type: SealedType, timestamp: str) -> None:
        self.graph_id, self.key_id, self.sealed_type, self.timestamp = graph_id, key_id, sealed_type, timestamp
        self._key: bytes | None = None

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Envelope) and (self.graph_id, self.key_id, self.sealed_type, self.timestamp) == (
            other.graph_id, other.key_id, other.sealed_type, other.timestamp)

    def __hash__(self) -> int:
        return hash((self.graph_id, self.key_id))

    @property
    def key(self) -> bytes:
        """The record key, in the key topic, of the key set holding its data key."""
        if self._key is None:
            self._key = key_record_key(self.graph_id, key_set_of(self.key_id))
        return self._key

    def aad(self) -> bytes:
        return f"{_AAD}\x00{self.graph_id}\x00{self.key_id}\x00{self.sealed_type}".encode()


def turn_key_id(turn_id: str, batch: str, n: int) -> str:
    """The key id of one sealing of a turn, the `n`th of a `batch` (random,
    from the caller): each sealing of a turn id (a client's retry, a turn
    sent again after it was forgotten) has a key of its own."""
    return f"turn/{batch}.{n}/{turn_id}"


def turn_of_key_id(key_id: str) -> str | None:
    """The turn id a turn's key id names (None: not a turn's)."""
    kind, _, rest = key_id.partition("/")
    return rest.partition("/")[2] if kind == "turn" else None


def snapshot_key_id(as_of: int, tag: str) -> str:
    """The key id of one writing of the snapshot started at offset `as_of`:
    `tag` (random, from the caller) tells apart the writings of one
    snapshot (a worker that stopped part way, and the one that wrote it
    again), each under a key of its own."""
    return f"snapshot/{as_of}/{tag}"


def snapshot_of_key_id(key_id: str) -> int | None:
    """The `as_of` of the snapshot a key id is for (None: not a snapshot's)."""
    kind, _, rest = key_id.partition("/")
    as_of = rest.partition("/")[0]
    return int(as_of) if kind == "snapshot" and as_of.isdigit() else None


def key_set_of(key_id: str) -> str:
    """The key set a key id's data key is kept in: a turn's, its batch's
    (`turn/<batch>`: the keys of a graph's turns sealed together, one record);
    a snapshot's, its own."""
    if not key_id.startswith("turn/"):
        return key_id
    return "turn/" + key_id[5:].partition("/")[0].partition(".")[0]


def key_record_key(graph_id: str, key_set: str) -> bytes:
    """A key set's record key: the graph and the set, joined by NUL (no
    identifier holds a control character), so a graph's sets share a prefix."""
    return f"{graph_id}\x00{key_set}".encode()


def graph_key_prefix(graph_id: str) -> bytes:
    return f"{graph_id}\x00".encode()


def seal(event_bytes: bytes, envelope: Envelope, data_key: bytes, nonce: bytes) -> bytes:
    """The `sealed` record carrying `event_bytes`: its envelope, a JSON
    object on one line (orjson writes no raw newline), then a newline and
    the sealed bytes: `nonce` (12 bytes, never reused with the key) ‖
    AES-256-GCM ciphertext ‖ tag under `data_key`, the envelope as
    associated data. (Raw bytes, not base64 in the JSON: decoding base64
    cost a replay 2.5 µs a turn, a quarter of opening it.)"""
    if len(data_key) != KEY_BYTES or len(nonce) != NONCE_BYTES:
        raise ValueError("a data key is 32 bytes and a nonce 12")
    header = orjson.dumps({
        "type": "sealed", "schema_version": 1, "graph_id": envelope.graph_id, "key_id": envelope.key_id,
        "sealed_type": envelope.sealed_type, "timestamp": envelope.timestamp,
    })
    return header + b"\n" + nonce + AESGCM(data_key).encrypt(nonce, event_bytes, envelope.aad())


def is_sealed(raw: bytes | None) -> bool:
    return raw is not None and raw.startswith(SEALED_PREFIX)


def sealed_header(raw: bytes) -> bytes:
    """A sealed record's envelope: its first line (the JSON object)."""
    end = raw.find(b"\n")
    return raw if end < 0 else raw[:end]


def envelope_of(raw: bytes) -> tuple[Envelope, memoryview]:
    """The envelope of a sealed record's bytes and the sealed bytes after
    it; SealError if they are not one."""
    end = raw.find(b"\n")
    try:
        obj = orjson.loads(raw[:end])
        graph_id, key_id = obj["graph_id"], obj["key_id"]
        envelope = Envelope(graph_id, key_id, obj["sealed_type"], obj["timestamp"])
    except (orjson.JSONDecodeError, KeyError, TypeError) as exc:
        raise SealError(f"not a sealed event: {exc}") from None
    if end < 0 or type(graph_id) is not str or type(key_id) is not str:
        raise SealError("not a sealed event: an envelope of strings on its first line, then the sealed bytes")
    return envelope, memoryview(raw)[end + 1:]


def open_sealed(envelope: Envelope, sealed: bytes | memoryview, data_key: bytes) -> bytes:
    """The bytes `seal` sealed; SealError if they do not open under
    `data_key` with this envelope."""
    try:
        return AESGCM(data_key).decrypt(sealed[:NONCE_BYTES], sealed[NONCE_BYTES:], envelope.aad())
    except (InvalidTag, ValueError):
        raise SealError(f"sealed {envelope.sealed_type} {envelope.key_id} of graph {envelope.graph_id!r} "
                        "does not open under its data key") from None


@dataclass(frozen=True)
class KeyEncryptionKey:
    """The operator's key-encryption key (32 bytes): seals every key set
    (AES-256-GCM with a random nonce per set written: far below GCM's bound
    of 2^32 messages a key at a set per graph and extract batch). Its
    fingerprint names it in each key record, so a set sealed under another
    one is told apart from a damaged one."""

    secret: bytes = field(repr=False)
    _id: bytes = field(init=False, repr=False, compare=False)  # the fingerprint's 8 bytes

    def __post_init__(self) -> None:
        if len(self.secret) != KEY_BYTES:
            raise ValueError(f"a key-encryption key is {KEY_BYTES} bytes, not {len(self.secret)}")
        object.__setattr__(self, "_id", hashlib.sha256(b"emgas kek\x00" + self.secret).digest()[:8])

    def __repr__(self) -> str:
        return f"KeyEncryptionKey({self.fingerprint})"

    @property
    def fingerprint(self) -> str:
        return self._id.hex()

    def seal_keys(self, record_key: bytes, keys: dict[str, bytes], nonce: bytes) -> bytes:
        """A key set's record value: a version byte, this key's fingerprint
        (8 bytes), the nonce, and the set's data keys (each its key id's
        length, 2 bytes, the key id, the 32-byte key) encrypted under this
        key with AES-256-GCM, the record key as associated data."""
        entries = b"".join(_ENTRY_LENGTH.pack(len(kid := key_id.encode())) + kid + data_key
                           for key_id, data_key in keys.items())
        return _KEY_RECORD_VERSION + self._id + nonce + AESGCM(self.secret).encrypt(nonce, entries, record_key)

    def open_keys(self, record_key: bytes, value: bytes) -> dict[str, bytes]:
        """Key id -> data key of a key set's record; SealError if it is not
        one this key sealed for that record key."""
        if len(value) < _KEY_RECORD_HEAD or value[:1] != _KEY_RECORD_VERSION:
            raise SealError(f"not a key record ({len(value)} bytes)")
        if value[1:9] != self._id:
            raise SealError(f"keys sealed by key-encryption key {value[1:9].hex()}, not this one ({self.fingerprint})")
        try:
            entries = AESGCM(self.secret).decrypt(value[9:_KEY_RECORD_HEAD], value[_KEY_RECORD_HEAD:], record_key)
        except InvalidTag:
            raise SealError("keys that do not open under this key-encryption key") from None
        keys, at = {}, 0
        while at < len(entries):
            (length,), at = _ENTRY_LENGTH.unpack_from(entries, at), at + _ENTRY_LENGTH.size
            key_id, at = entries[at:at + length].decode(), at + length
            keys[key_id], at = entries[at:at + KEY_BYTES], at + KEY_BYTES
        return keys
