"""A reader of the graph-events log on the configured broker (recovery, snapshots, replay)."""

from __future__ import annotations

from emgas.processors.sealing import KeyEncryptionKey
from emgas.replay.keyring import KeyRing
from emgas.replay.reader import LogReader
from emgas.streams.settings import Settings


def log_reader(settings: Settings, keys: KeyRing | None = None) -> LogReader:
    """A reader of the configured broker, with its security options, that
    opens the sealed records it reads with `keys` (a worker's own ring,
    which keeps the keys it read) or with a ring of its own.

    Its fetch wait is the reader's own short one (10 ms), not
    `EMGAS_FETCH_MAX_WAIT_MS`: it reads known ranges of the log (recovery,
    snapshots, replay), and its idle fetches, at the end of a range, are
    waited out in full on either broker (with 500 ms, a takeover from a
    snapshot took 9.9 s instead of 4.3)."""
    own = keys is None
    ring = key_ring(settings) if keys is None else keys
    return LogReader(settings.bootstrap_servers(), client_options=settings.kafka_options(), keys=ring, own_keys=own)


def key_ring(settings: Settings, kek: KeyEncryptionKey | None = None) -> KeyRing:
    """A ring of `kek`, else of the configured key-encryption key (none:
    sealed records are refused when met), reading the key topic with a
    plain reader."""
    return KeyRing(kek or settings.kek(), settings.keys_topic, lambda: _plain_reader(settings))


def _plain_reader(settings: Settings) -> LogReader:
    return LogReader(settings.bootstrap_servers(), client_options=settings.kafka_options())
