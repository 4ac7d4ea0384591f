"""The soak's faults: a seeded schedule, and each fault done to the fleet.

Kinds (every one in each round of the schedule, in a seeded order):

- `worker_sigkill`: a worker SIGKILLed, started again on the same state;
- `worker_sigterm`: a worker stopped with SIGTERM (it hands its partitions
  over), started again;
- `leader_sigkill`: the broker leading the graph-events partition that
  holds the most records SIGKILLed, started again on its log;
- `broker_sigstop`: a broker stalled with SIGSTOP for `stall_s`, then SIGCONT
  (a node that hangs rather than dies);
- `bad_records`: a burst of malformed records on the turns topic;
- `worker_wipe`: a worker stopped, its state directory removed, started
  again (it rebuilds from snapshots and the log).
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from typing import Any

from emgas.tools.soak.fleet import Fleet

KINDS = ("worker_sigkill", "worker_sigterm", "leader_sigkill", "broker_sigstop", "bad_records", "worker_wipe")
WORKER_DOWN_S = 2.0  # a crashed worker stays down this long before it is started again
BROKER_DOWN_S = 5.0  # a crashed broker likewise


@dataclass(frozen=True)
class Planned:
    at_s: float  # seconds after the load began, at the earliest
    kind: str
    worker: str  # the worker a worker fault is done to
    node: int  # the broker a stall is done to (a leader kill finds its own)
    stall_s: float


def plan(seed: int, duration_s: float, every_s: float, workers: list[str], nodes: int,
         stall_s: tuple[float, float] = (10.0, 20.0), first_s: float | None = None) -> list[Planned]:
    """A fault every `every_s` from `first_s` (default `every_s`) until `duration_s`,
    kinds in rounds of all of them, each round in an order drawn from `seed`."""
    rng = random.Random(seed)
    out: list[Planned] = []
    at = every_s if first_s is None else first_s
    kinds: list[str] = []
    while at < duration_s:
        if not kinds:
            kinds = list(KINDS)
            rng.shuffle(kinds)
        out.append(Planned(round(at, 1), kinds.pop(0), rng.choice(workers), rng.randint(1, nodes),
                           round(rng.uniform(*stall_s), 1)))
        at += every_s
    return out


@dataclass
class FaultRecord:
    """A fault as it happened: seconds since the load began."""

    kind: str
    target: str
    started_s: float
    done_s: float = 0.0  # the fault's action over (restarted, resumed, sent)
    recovered_s: float | None = None  # every worker ready and every partition answering again
    over: bool = False  # recovered, or given up on
    details: dict[str, Any] = field(default_factory=dict)

    def window(self, settle_s: float) -> tuple[float, float]:
        """The stretch counted as "in the fault": from its start until `settle_s` after it recovered."""
        end = self.recovered_s if self.recovered_s is not None else float("inf")
        return self.started_s, end + settle_s


def busiest_leader(fleet: Fleet) -> tuple[int, int]:
    """(partition, leader node) of the graph-events partition holding the most records."""
    from confluent_kafka import Consumer, TopicPartition

    topic = fleet.settings.graph_events_topic
    consumer = Consumer({"bootstrap.servers": fleet.settings.bootstrap_servers(), "group.id": "emgas-soak-probe",
                         "log_level": 0})
    try:
        metadata = consumer.list_topics(topic, timeout=10).topics[topic]
        sizes = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in metadata.partitions}
        busiest = max(sizes, key=lambda p: sizes[p])
        return busiest, metadata.partitions[busiest].leader
    finally:
        consumer.close()


def act(fleet: Fleet, fault: Planned, record: FaultRecord) -> None:
    """Do `fault` to the fleet (blocking: run it in a thread); `record` gets its target and details."""
    if fault.kind == "worker_sigkill":
        fleet.kill_worker(fault.worker)
        time.sleep(WORKER_DOWN_S)
        record.details["pid"] = fleet.start_worker(fault.worker)
    elif fault.kind == "worker_sigterm":
        started = time.monotonic()
        record.details["exit_status"] = fleet.stop_worker(fault.worker)
        record.details["stop_s"] = round(time.monotonic() - started, 2)
        record.details["pid"] = fleet.start_worker(fault.worker)
    elif fault.kind == "worker_wipe":
        record.details["exit_status"] = fleet.stop_worker(fault.worker)
        fleet.wipe_worker(fault.worker)
        record.details["pid"] = fleet.start_worker(fault.worker)
    elif fault.kind == "leader_sigkill":
        partition, node = busiest_leader(fleet)
        record.target = f"node-{node}"
        record.details["partition"] = partition
        fleet.kill_node(node)
        time.sleep(BROKER_DOWN_S)
        started = time.monotonic()
        fleet.restart_node(node)
        record.details["restart_s"] = round(time.monotonic() - started, 2)
    elif fault.kind == "broker_sigstop":
        fleet.stall_node(fault.node)
        try:
            time.sleep(fault.stall_s)
        finally:
            fleet.resume_node(fault.node)
        record.details["stall_s"] = fault.stall_s
    else:
        raise ValueError(f"no such fault: {fault.kind}")


def target(fault: Planned) -> str:
    if fault.kind.startswith("worker_"):
        return fault.worker
    if fault.kind == "broker_sigstop":
        return f"node-{fault.node}"
    return "turns topic" if fault.kind == "bad_records" else "busiest leader"
