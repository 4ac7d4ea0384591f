"""The one settings object (pydantic-settings, `EMGAS_*` environment variables).

Built once by the entry point and passed down; nothing else reads the
environment. Nested parameters use `__`, e.g.
`EMGAS_ACTIVATION__PROPAGATION_DECAY=0.6`.
"""

from __future__ import annotations

import json
import os
import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from emgas.processors.activation import ActivationParams
from emgas.processors.extract import ExtractionParams
from emgas.processors.graph import GraphParams
from emgas.streams.errors import ConfigError

if TYPE_CHECKING:
    from emgas.processors.sealing import KeyEncryptionKey


DEFAULT_HEAP = "-Xms128m -Xmx512m"  # JVM heap options of the real broker (`EMGAS_KAFKA_HEAP`)


def default_cache() -> Path:
    """Where `install` puts the jars: $XDG_CACHE_HOME/emgas or ~/.cache/emgas."""
    root = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(root) / "emgas"


@dataclass(frozen=True)
class TopicSpec:
    """A topic to create: its name and partition count."""

    name: str
    partitions: int


Protocol = Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]
Mechanism = Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]


class KafkaSecurity(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")  # field docstrings: the settings reference (tools.reference reads them)

    security_protocol: Protocol = "PLAINTEXT"
    """How clients reach Kafka: PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL."""
    sasl_mechanism: Mechanism = "PLAIN"
    """The SASL mechanism: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512."""
    sasl_username: str | None = None
    """The SASL user (required with SASL_*)."""
    sasl_password: SecretStr | None = None
    """The SASL password (required with SASL_*; masked in `emgas config`)."""
    ssl_cafile: Path | None = None
    """CA certificates to trust the brokers with (PEM); unset: the system's."""
    ssl_certfile: Path | None = None
    """This client's certificate (PEM), for brokers that authenticate clients by TLS."""
    ssl_keyfile: Path | None = None
    """The private key of `ssl_certfile` (PEM)."""

    @model_validator(mode="after")
    def _complete(self) -> "KafkaSecurity":
        if self.security_protocol.startswith("SASL") and not (self.sasl_username and self.sasl_password):
            raise ValueError(f"{self.security_protocol} needs sasl_username and sasl_password")
        return self

    @property
    def uses_tls(self) -> bool:
        return self.security_protocol in ("SSL", "SASL_SSL")

    def ssl_context(self) -> ssl.SSLContext | None:
        if not self.uses_tls:
            return None
        from aiokafka.helpers import create_ssl_context

        return create_ssl_context(cafile=self.ssl_cafile, certfile=self.ssl_certfile, keyfile=self.ssl_keyfile)

    def aiokafka_options(self) -> dict[str, Any]:
        """Keyword arguments for AIOKafkaProducer / Consumer / AdminClient."""
        if self.security_protocol == "PLAINTEXT":
            return {}
        options: dict[str, Any] = {"security_protocol": self.security_protocol, "ssl_context": self.ssl_context()}
        if self.security_protocol.startswith("SASL"):
            options.update(
                sasl_mechanism=self.sasl_mechanism,
                sasl_plain_username=self.sasl_username,
                sasl_plain_password=self.sasl_password.get_secret_value() if self.sasl_password else None,
            )
        return options

    def faust_credentials(self) -> Any:
        """`broker_credentials` for the Faust app (None: plaintext)."""
        import faust

        if self.security_protocol.startswith("SASL"):
            return faust.SASLCredentials(
                username=self.sasl_username,
                password=self.sasl_password.get_secret_value() if self.sasl_password else None,
                ssl_context=self.ssl_context(), mechanism=self.sasl_mechanism,
            )
        if self.security_protocol == "SSL":
            return faust.SSLCredentials(self.ssl_context())
        return None


MOCK_FETCH_WAIT_MS = 10  # see Settings.fetch_wait_ms
KAFKA_FETCH_WAIT_MS = 100
# The most bytes of records a producer puts in one batch of a partition
# (aiokafka's and Faust's default: 16 KiB). A worker sends an extract
# batch's graph events (200 turns, about 1 KB each) and awaits their
# acknowledgements, and a producer has one request in flight to a broker:
# in batches of 16 KiB they went in a dozen requests one after the other,
# which took two to five times as long as extracting the turns. A quarter of
# the broker's default `message.max.bytes` (1 MiB): a larger record still
# goes alone in a batch of its own.
PRODUCE_BATCH_BYTES = 256 * 1024


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="EMGAS_", env_nested_delimiter="__", frozen=True)  # field docstrings: the settings reference (tools.reference reads them)

    broker: str | None = None
    """Comma-separated host:port list, `kafka://` prefix optional. Unset: the broker file `emgas broker` writes
    under `home` once its broker is up."""
    broker_wait_s: float = Field(default=60.0, ge=0, le=3600)
    """How long `emgas worker`, `emgas mcp` and `emgas publish --wait` wait for a broker that is not up yet: for the
    broker file `emgas broker` writes once Kafka is up, then for a bootstrap server to answer (0: fail at once)."""
    home: Path = Field(default_factory=lambda: Path.home() / ".emgas")
    """Where a machine keeps its state: workers' data, the broker file, `emgas broker`'s Kafka log, replays."""
    data_dir: Path | None = None
    """The worker's state directory (default: home/data/<worker name>)."""
    worker_name: str = "worker-1"
    """This worker's name; its state lives in home/data/<worker name> (a new name starts empty)."""
    app_id: str = "emgas"
    """The Faust app id: the workers' consumer group."""

    partitions: int = Field(default=8, ge=1, le=1024)
    """Partitions of the graph-events and queries topics (co-partitioned: a query meets its graph's state)."""
    turn_partitions: int = Field(default=8, ge=1, le=1024)
    """Partitions of the turns topic."""
    reply_partitions: int = Field(default=4, ge=1, le=1024)
    """Partitions of the replies topic."""
    replication_factor: int = Field(default=1, ge=1)
    """Replication factor of the topics the worker creates (3 on a production cluster)."""
    turns_topic: str = "emgas.turns"
    """Where conversation turns are published."""
    graph_events_topic: str = "emgas.graph-events"
    """The log of every change of state: the source of truth, kept forever."""
    queries_topic: str = "emgas.queries"
    """Activation, digest, stats and passage queries."""
    owners_topic: str = "emgas.owners"
    """Which worker answers each partition's queries (compacted)."""
    hand_over_s: float = Field(default=30.0, ge=0, le=600)
    """On SIGTERM a worker leaves its group and answers its partitions' queries until their new owners have caught
    up, this long at most (0: stop at once)."""
    replies_topic: str = "emgas.replies"
    """Where replies go unless a query names its own `reply_to`."""
    dlq_topic: str = "emgas.dlq"
    """Dead letters: input that could not be processed, with its original bytes and the reason."""
    keys_topic: str = "emgas.keys"
    """The data keys of sealed turns and snapshots, wrapped by the key-encryption key (compacted: a forgotten turn's
    key is erased by a tombstone)."""
    seal: bool = True
    """Seal each turn's words (its turn_ingested event) and each snapshot in the log under a data key of its own, so
    that forgetting a turn erases its words from Kafka once the key topic is compacted (docs/operations.md:
    retention). A log may hold sealed and unsealed records: readers open what is sealed whatever this says."""
    key_encryption_key: SecretStr | None = None
    """The key-encryption key, base64 of 32 bytes (`head -c 32 /dev/urandom | base64`): the same for every worker,
    replay and forget of a cluster. Unset: EMGAS_KEY_ENCRYPTION_KEY_FILE, else home/key-encryption-key, which the
    first sealing worker makes."""
    key_encryption_key_file: Path | None = None
    """A file holding the key-encryption key (instead of EMGAS_KEY_ENCRYPTION_KEY)."""
    key_erasure_ms: int = Field(default=3_600_000, ge=1)
    """How soon Kafka compacts an erased data key away, at most (plus its cleaner's pass): the key topic's
    segment.ms and max.compaction.lag.ms on a real Kafka."""
    turns_retention_ms: int = Field(default=7 * 86_400_000, ge=1)
    """Retention of the turns topic on a real Kafka (default 7 days): turns are read back only by
    `replay --from-turns`, and their text is there as published, so this bounds how long a forgotten turn stays
    readable there."""

    fetch_max_wait_ms: int | None = Field(default=None, ge=1, le=5000)
    """Longest time the broker may hold an idle fetch (None: decided by the broker, see `fetch_wait_ms`)."""
    session_timeout_s: float = Field(default=6.0, gt=0)
    """Kafka consumer group session timeout: a worker silent this long loses its partitions."""
    heartbeat_interval_s: float = Field(default=1.0, gt=0)
    """How often a worker tells its group it is alive."""
    log_format: Literal["text", "json"] = "text"
    """The worker's log lines: plain text, or one JSON object per line."""
    web_host: str = "127.0.0.1"
    """Address of the worker's web server (viewer, /metrics, /health); beyond loopback it needs a token."""
    web_port: int = 6066
    """Port of the worker's web server."""
    http_token: SecretStr | None = None
    """The bearer token of the worker's web server and `emgas mcp --http` (`streams.http_auth`); without one they
    listen on loopback only."""
    http_token_file: Path | None = None
    """A file holding the bearer token (instead of EMGAS_HTTP_TOKEN)."""
    query_timeout_s: float = Field(default=10.0, gt=0)
    """How long a client waits for a reply before giving up. A worker does not answer a query older than this when
    it takes it (by the request's timestamp, so the clocks of clients and workers must agree well within it): its
    client has given up, and answering it would delay the queries behind it."""
    max_future_s: float = Field(default=86_400.0, gt=0)
    """Turns stamped further ahead of the worker's clock go to the DLQ."""
    evict_idle_s: float = Field(default=1800.0, ge=0)
    """A graph's in-memory view not used (no event, query or due tick) for this long is dropped and loaded from the
    store on its next use (`state.view_cache`); checked every graph.idle_check_s. 0: never."""
    extract_batch: int = Field(default=200, ge=1, le=10_000)
    """The extract agent extracts up to this many turns at a time (the fetches that come within
    extract_batch_wait_s of the first) and awaits their sends together."""
    extract_batch_wait_s: float = Field(default=0.005, gt=0, le=5)
    """The longest the extract agent waits for more fetches to fill a batch."""
    apply_batch: int = Field(default=500, ge=1, le=10_000)
    """The apply agent applies up to this many graph events at a time (the fetches that come within
    apply_batch_wait_s of the first), then emits what became due and commits the partition states (as
    state_commit_interval_s paces them; see `streams.runtime.commit_order`)."""
    state_commit_interval_s: float = Field(default=5.0, ge=0, le=60)
    """A worker commits a partition's state (RocksDB) after a batch at most this often, in seconds (0: after every
    batch). A crash re-folds the log after the state's last commit, so this bounds that work; a commit rewrites
    every pair row changed since the last one (a hub's row is long), so committing every 1,000 events instead of
    every 5,000 costs about a quarter more fold CPU."""
    apply_batch_wait_s: float = Field(default=0.005, gt=0, le=5)
    """The longest the apply agent waits for more fetches to fill a batch."""
    extract_processes: int = Field(default=0, ge=0, le=64)
    """Processes that run extraction, so it overlaps with Kafka and the fold in the worker's own process (0:
    extract in the worker's event loop)."""

    on_log_reset: Literal["rebase", "rebuild", "stop"] = "rebase"
    """What a worker does when the log is not the one its state reflects (the mock broker restarted, a topic
    recreated, another cluster): rebase: keep the state and append snapshots of its graphs to the new log;
    rebuild: drop the state and fold the new log; stop: exit with an error."""
    snapshot_min_bytes: int = Field(default=1024 * 1024, ge=0)
    """Snapshot rounds: when the events applied to a partition since the last round pass max(snapshot_min_bytes,
    snapshot_ratio x the last round's snapshot bytes), every graph of it is snapshotted (0: no rounds)."""
    snapshot_ratio: float = Field(default=1.0, ge=0)
    """See snapshot_min_bytes: rounds grow with the graphs' snapshot size (0: by bytes only)."""
    replies_retention_ms: int = Field(default=3_600_000, ge=1)
    """Retention of the replies topic on a real Kafka (emgas.graph-events, the source of truth, is kept forever)."""
    dlq_retention_ms: int = Field(default=30 * 86_400_000, ge=1)
    """Retention of the dead-letter topic on a real Kafka (default 30 days)."""

    broker_kind: Literal["auto", "kafka", "mock"] = "auto"
    """Which broker `emgas broker` and `emgas demo` run: a real Kafka when Java and the jars are here (auto), else
    librdkafka's mock cluster."""
    kafka_home: Path | None = None
    """A Kafka distribution to run instead of the pinned jars (its libs/*.jar)."""
    kafka_cache: Path = Field(default_factory=default_cache)
    """Where `emgas broker --install` puts the pinned Kafka's jars."""
    word_vectors_cache: Path = Field(default_factory=default_cache)
    """Where a worker keeps the word vectors of semantic seeds across restarts (one SQLite file per model), so a
    word is encoded once per machine and a partition taken over is ready without encoding its graphs again; and
    the lemmatiser's decoded dictionaries (`service.lemma_cache`) and jieba's lexicon (`service.chinese_lexicon`),
    so a worker starts and reads its first Chinese turn without decoding them."""
    kafka_heap: str = DEFAULT_HEAP
    """JVM heap options of the real broker `emgas broker` runs."""

    wordnet_dir: Path | None = None
    """A WordNet 3.0 database directory (WNDB: data.noun, index.noun, ...) for query expansion; unset: Debian's
    /usr/share/wordnet (`make wordnet`) if present, else queries expand nothing (said once in the log)."""

    kafka: KafkaSecurity = KafkaSecurity()
    """Kafka security, passed to every client (EMGAS_KAFKA__*)."""
    extraction: ExtractionParams = ExtractionParams()
    """Concept extraction (EMGAS_EXTRACTION__*)."""
    activation: ActivationParams = ActivationParams()
    """Spreading activation and ranking, the defaults of every query (EMGAS_ACTIVATION__*)."""
    graph: GraphParams = GraphParams()
    """Applying graph events: reinforcement, windows, decay, consolidation (EMGAS_GRAPH__*)."""

    @property
    def broker_file(self) -> Path:
        return self.home / "broker.json"

    @property
    def kafka_dir(self) -> Path:
        """Where `emgas broker` keeps its real Kafka: config, log (the records), output."""
        return self.home / "kafka"

    @property
    def worker_data_dir(self) -> Path:
        return self.data_dir or self.home / "data" / self.worker_name

    def bootstrap_servers(self) -> str:
        """`host:port,host:port` of the broker to use; ConfigError if none is known."""
        if self.broker:
            servers = [s.strip().removeprefix("kafka://") for s in self.broker.split(",")]
            return ",".join(s for s in servers if s)
        try:
            return json.loads(self.broker_file.read_text())["bootstrap_servers"]
        except (OSError, ValueError, KeyError):
            raise ConfigError(
                f"no broker configured: set EMGAS_BROKER=host:port, or start one with "
                f"`emgas broker` (it writes {self.broker_file})"
            ) from None

    def fetch_wait_ms(self, on_mock: bool = True) -> int:
        """The longest idle fetch, ms: `fetch_max_wait_ms` when set; else 100
        on Apache Kafka, which answers a fetch as soon as data arrives, and 10
        on librdkafka's mock cluster, which holds an idle fetch the whole wait
        and would delay every reply by it. On Kafka, measured on 2 cores: 10 ms
        costs an idle worker and its broker 15 % + 23 % of a core, 100 ms 8 % +
        9 %, 500 ms 4 % + 4 %; but the pause of a worker joining grows with it
        (median of 5: 1.9 s at 10 ms, 3.5 s at 500; 1.9 s at 100, of 3),
        probably as steps of a rebalance on a quiet log wait out idle
        fetches. A client that has not asked its broker (`on_mock` unknown)
        takes 10."""
        if self.fetch_max_wait_ms is not None:
            return self.fetch_max_wait_ms
        return MOCK_FETCH_WAIT_MS if on_mock else KAFKA_FETCH_WAIT_MS

    def web_token(self) -> str | None:
        """The HTTP bearer token (None: none configured); ConfigError if unusable."""
        from emgas.streams.http_auth import http_token

        return http_token(self.http_token, self.http_token_file)

    def kek(self, create: bool = False) -> "KeyEncryptionKey | None":
        """The key-encryption key (`streams.kek`; the default file made when
        `create`), None when there is none; ConfigError if unusable."""
        from emgas.streams.kek import load_kek

        return load_kek(self.key_encryption_key, self.key_encryption_key_file, self.home, create)

    def kafka_options(self) -> dict:
        """Security options for every aiokafka client (see `streams.kafka.security`)."""
        return self.kafka.aiokafka_options()

    def topics(self) -> list[TopicSpec]:
        """Every topic the system uses, with its partition count."""
        return [
            TopicSpec(self.turns_topic, self.turn_partitions),
            TopicSpec(self.graph_events_topic, self.partitions),
            TopicSpec(self.queries_topic, self.partitions),
            TopicSpec(self.replies_topic, self.reply_partitions),
            TopicSpec(self.dlq_topic, 1),
            TopicSpec(self.owners_topic, 1),
            TopicSpec(self.keys_topic, self.partitions),  # a graph's keys in its events' partition
        ]
