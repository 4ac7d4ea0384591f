"""Sealing: a graph event's words in the log under a data key of its own.

A turn's `turn_ingested` event (its text, speaker, metadata and concepts)
and each part of a snapshot (a graph's passages and concept names) are
written to `emgas.graph-events` as a `sealed` event: a clear envelope (the
graph, which key, the event time) around the event's own bytes encrypted
with AES-256-GCM under a data key used for that turn, or that snapshot,
only. The data keys live in a compacted topic, each wrapped (AES key wrap,
RFC 3394) by the operator's key-encryption key; forgetting a turn writes a
tombstone for its key, and once Kafka has compacted it the sealed bytes
are unreadable anywhere: what crypto-shredding promises.

Opening gives back exactly the bytes that were sealed, so the fold, its
journal and every digest see what an unsealed log holds. Everything here
is pure: the keys and nonces come from the caller.

The associated data binds a ciphertext to its envelope (graph, key id and
what it holds), so an envelope moved to another graph or turn does not
open.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from dataclasses import dataclass
from typing import Literal

import orjson
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.keywrap import InvalidUnwrap, aes_key_unwrap, aes_key_wrap

KEY_BYTES = 32  # AES-256: data keys and the key-encryption key
NONCE_BYTES = 12  # AES-GCM's standard nonce
SEALED_PREFIX = b'{"type":"sealed"'
SealedType = Literal["turn_ingested", "snapshot"]
_AAD = b"emgas sealed v1"
_KEY_RECORD_VERSION = 1


class SealError(ValueError):
    """A sealed record or key record that does not open: tampered with,
    truncated, or sealed under another key."""


@dataclass(frozen=True)
class Envelope:
    """What a sealed event shows in clear: its graph, its key's id within
    the graph (`turn/<turn id>`, `snapshot/<offset>`), what it holds and
    the sealed event's time."""

    graph_id: str
    key_id: str
    sealed_type: SealedType
    timestamp: str

    @property
    def key(self) -> bytes:
        """The data key's record key in the key topic."""
        return key_record_key(self.graph_id, self.key_id)

    def aad(self) -> bytes:
        return b"\x00".join((_AAD, self.graph_id.encode(), self.key_id.encode(), self.sealed_type.encode()))


def turn_key_id(turn_id: str, tag: str) -> str:
    """The key id of one sealing of a turn: `tag` (random, from the caller)
    tells apart the sealings of one turn id (a client's retry, a turn sent
    again after it was forgotten), each under a key of its own."""
    return f"turn/{tag}/{turn_id}"


def turn_of_key_id(key_id: str) -> str | None:
    """The turn id a turn's key id names (None: not a turn's)."""
    kind, _, rest = key_id.partition("/")
    return rest.partition("/")[2] if kind == "turn" else None


def snapshot_key_id(as_of: int) -> str:
    return f"snapshot/{as_of}"


def key_record_key(graph_id: str, key_id: str) -> bytes:
    """A data key's record key: the graph and the key id, joined by NUL (no
    identifier holds a control character), so a graph's keys share a prefix."""
    return f"{graph_id}\x00{key_id}".encode()


def graph_key_prefix(graph_id: str) -> bytes:
    return f"{graph_id}\x00".encode()


def seal(event_bytes: bytes, envelope: Envelope, data_key: bytes, nonce: bytes) -> bytes:
    """The `sealed` event carrying `event_bytes`: AES-256-GCM under
    `data_key` with `nonce` (12 bytes, never reused with the key), the
    envelope as associated data; its `data` is base64 of nonce ‖ ciphertext ‖ tag."""
    if len(data_key) != KEY_BYTES or len(nonce) != NONCE_BYTES:
        raise ValueError("a data key is 32 bytes and a nonce 12")
    sealed = nonce + AESGCM(data_key).encrypt(nonce, event_bytes, envelope.aad())
    return orjson.dumps({
        "type": "sealed", "schema_version": 1, "graph_id": envelope.graph_id, "key_id": envelope.key_id,
        "sealed_type": envelope.sealed_type, "timestamp": envelope.timestamp,
        "data": base64.b64encode(sealed).decode(),
    })


def is_sealed(raw: bytes | None) -> bool:
    return raw is not None and raw.startswith(SEALED_PREFIX)


def envelope_of(raw: bytes) -> tuple[Envelope, str]:
    """The envelope of a sealed event's bytes and its base64 data; SealError
    if they are not one."""
    try:
        obj = orjson.loads(raw)
        envelope = Envelope(obj["graph_id"], obj["key_id"], obj["sealed_type"], obj["timestamp"])
        data = obj["data"]
    except (orjson.JSONDecodeError, KeyError, TypeError) as exc:
        raise SealError(f"not a sealed event: {exc}") from None
    if not all(isinstance(v, str) for v in (envelope.graph_id, envelope.key_id, envelope.timestamp, data)):
        raise SealError("a sealed event's envelope holds strings")
    return envelope, data


def open_sealed(envelope: Envelope, data: str, data_key: bytes) -> bytes:
    """The bytes `seal` sealed; SealError if they do not open under
    `data_key` with this envelope."""
    try:
        sealed = base64.b64decode(data, validate=True)
        return AESGCM(data_key).decrypt(sealed[:NONCE_BYTES], sealed[NONCE_BYTES:], envelope.aad())
    except (binascii.Error, InvalidTag, ValueError):
        raise SealError(f"sealed {envelope.sealed_type} {envelope.key_id} of graph {envelope.graph_id!r} "
                        "does not open under its data key") from None


@dataclass(frozen=True)
class KeyEncryptionKey:
    """The operator's key-encryption key (32 bytes): wraps every data key.
    Its fingerprint names it in each key record, so a key wrapped by another
    one is told apart from a damaged one."""

    secret: bytes

    def __post_init__(self) -> None:
        if len(self.secret) != KEY_BYTES:
            raise ValueError(f"a key-encryption key is {KEY_BYTES} bytes, not {len(self.secret)}")

    def __repr__(self) -> str:
        return f"KeyEncryptionKey({self.fingerprint})"

    @property
    def fingerprint(self) -> str:
        return hashlib.sha256(b"emgas kek\x00" + self.secret).hexdigest()[:16]

    def wrap(self, data_key: bytes) -> bytes:
        """A key record's value: the data key wrapped (RFC 3394), with this key's fingerprint."""
        return orjson.dumps({
            "v": _KEY_RECORD_VERSION, "kek": self.fingerprint,
            "key": base64.b64encode(aes_key_wrap(self.secret, data_key)).decode(),
        })

    def unwrap(self, record_value: bytes) -> bytes:
        """The data key of a key record's value; SealError if it is not one
        this key wrapped."""
        try:
            obj = orjson.loads(record_value)
            wrapped = base64.b64decode(obj["key"], validate=True)
            kek = obj["kek"]
        except (orjson.JSONDecodeError, KeyError, TypeError, binascii.Error) as exc:
            raise SealError(f"not a key record: {exc}") from None
        if kek != self.fingerprint:
            raise SealError(f"a data key wrapped by key-encryption key {kek}, not this one ({self.fingerprint})")
        try:
            return aes_key_unwrap(self.secret, wrapped)
        except (InvalidUnwrap, ValueError):
            raise SealError("a data key that does not unwrap under this key-encryption key") from None
