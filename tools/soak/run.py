"""`emgas soak`: turns and queries at steady rates on a three-node Kafka and
a group of workers, a seeded schedule of faults while they flow, then the
reconciliation (`tools.soak.reconcile`) and the figures.

The phases: the cluster and the workers start; a warm-up turn per graph is
published and applied; for `duration_s` the load flows and the faults come
one after the other (a fault starts at its planned time, or when the one
before has recovered); then the last acks are awaited, every worker is
made to run, every acknowledged turn is waited for, and the graphs, the
replay of the log from its beginning and the dead-letter topic are read.
Every process started is ended by its PID, whatever happens (`Fleet.close`).
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from emgas.processors.events import DeadLetter, PassagesReply, StatsReply
from emgas.replay.fold import Selection
from emgas.replay.errors import ReplayError
from emgas.streams.errors import QueryTimeout, StreamsError
from emgas.streams.interfaces.admin import replay
from emgas.streams.interfaces.client import MemoryClient
from emgas.streams.kafka.reader import log_reader
from emgas.streams.settings import Settings
from emgas.tools.harness import percentile
from emgas.testing import wait_for_turns, wait_for_workers, wait_until_warm
from emgas.tools.soak.faults import KINDS, FaultRecord, Planned, act, plan, target
from emgas.tools.soak.fleet import Fleet
from emgas.tools.soak.reconcile import ACKED, Attempt, BadRecord, GraphCounts, SoakRecords, reconcile
from emgas.tools.soak.traffic import Ask, Asker, Publisher, bad_records, committed_past, interleaved, producer, send_bad
from emgas.tools.synthetic import Shape, conversations

LEVEL_AT_S = 120.0  # RSS levels are compared with the level this long into a process's stretch
WARM_S = 15.0  # a worker started during the soak: its RSS is compared from this long after its start
PASSAGES_ASKED = 300  # turn ids per passage query at the end (a reply stays far below Kafka's 1 MiB)


@dataclass(frozen=True)
class SoakOptions:
    duration_s: float = 300.0
    rate: float = 100.0  # turns offered a second
    queries_per_s: float = 4.0
    query_users: int = 4  # concurrent askers, one query at a time each
    graphs: int = 50
    workers: int = 2
    fault_every_s: float = 30.0
    first_fault_s: float | None = None  # default: fault_every_s
    seed: int = 1
    query_timeout_s: float = 5.0
    stall_s: tuple[float, float] = (10.0, 20.0)
    bad_per_kind: int = 2
    rss_every_s: float = 2.0
    settle_s: float = 2.0  # after a fault recovered, still counted as in it
    recovery_timeout_s: float = 120.0
    drain_timeout_s: float = 180.0  # at the end, for every acknowledged turn to be applied
    partitions: int = 8
    every_kind: bool = False  # go on past duration_s until every kind of fault was done once
    worker_env: dict[str, str] = field(default_factory=dict)
    worker_loglevel: str = "WARNING"
    trace_memory: Path | None = None  # workers run under `emgas.tools.memtrace`, writing their heap's growth here
    trace_memory_every_s: float = 20.0
    drop_turns: int = 0  # test-only: turns recorded as acknowledged but never sent (`Publisher.drop`)


def run_soak(settings: Settings, options: SoakOptions, keep: Path | None = None) -> dict[str, Any]:
    """The soak's figures and its reconciliation (`ok`, `failures`); `keep`: leave
    the cluster's logs and the workers' output there instead of a removed temp dir."""
    home = keep or Path(tempfile.mkdtemp(prefix="emgas-soak-"))
    base = settings.model_copy(update={"home": home, "partitions": options.partitions,
                                       "turn_partitions": options.partitions, "query_timeout_s": 30.0})
    fleet: Fleet | None = None
    kafka_logs = logging.getLogger("aiokafka")
    level = kafka_logs.level
    kafka_logs.setLevel(logging.CRITICAL)  # the faults are on purpose: the clients' reconnect warnings are noise here
    try:
        env, command = dict(options.worker_env), None
        if options.trace_memory is not None:
            env.update(EMGAS_MEMTRACE_DIR=str(options.trace_memory), EMGAS_MEMTRACE_EVERY_S=str(options.trace_memory_every_s))
            command = [sys.executable, "-m", "emgas.tools.memtrace", "worker"]
        fleet = Fleet.start(base, home, env=env, command=command, loglevel=options.worker_loglevel)
        names = [f"worker-{i + 1}" for i in range(options.workers)]
        for name in names:
            fleet.start_worker(name)
        return asyncio.run(Soak(fleet, options, names).run())
    finally:
        kafka_logs.setLevel(level)
        if fleet is not None:
            fleet.close()
        if keep is None:
            shutil.rmtree(home, ignore_errors=True)


class Soak:
    def __init__(self, fleet: Fleet, options: SoakOptions, names: list[str]) -> None:
        self.fleet, self.options, self.names = fleet, options, names
        self.settings = fleet.settings
        self.started = time.monotonic()
        self.faults: list[FaultRecord] = []
        self.bad: list[BadRecord] = []
        self.rss: dict[str, list[list[float]]] = {name: [] for name in names}
        self.load_s = 0.0
        self.replayed_graphs = 0  # graphs the end-of-run replay rebuilt (0: it could not finish)
        self.graphs: set[str] = set()  # the soak's graphs, once the warm-up has published to each
        self.unanswered_graphs: list[str] = []  # graphs that did not answer at the end
        self.starts: list[list[Any]] = []  # [seconds, worker, pid] of every worker start after the first

    def clock(self) -> float:
        return round(time.monotonic() - self.started, 3)

    async def run(self) -> dict[str, Any]:
        o = self.options
        turns = interleaved(conversations(int(o.rate * o.duration_s) + o.graphs, Shape(graphs=o.graphs, seed=o.seed)))
        first = o.fault_every_s if o.first_fault_s is None else o.first_fault_s
        planned_until = max(o.duration_s, first + o.fault_every_s * len(KINDS)) if o.every_kind else o.duration_s
        schedule = plan(o.seed, planned_until, o.fault_every_s, self.names, len(self.fleet.cluster.nodes), o.stall_s,
                        first)
        kafka = producer(self.settings)
        await kafka.start()
        try:
            async with MemoryClient(self.settings) as client:
                publisher = Publisher(self.settings, kafka, turns, o.rate, drop=o.drop_turns, drop_from=o.graphs)
                await self._warm_up(client, publisher)
                asker = Asker(client, publisher.texts, o.queries_per_s, o.query_timeout_s, self.clock, o.query_users)
                await self._load(client, kafka, publisher, asker, schedule)
                records = await self._gather(client, publisher, asker)
        finally:
            await kafka.stop()
        return self._figures(records, asker, schedule)

    async def _warm_up(self, client: MemoryClient, publisher: Publisher) -> None:
        """A first turn for every graph, applied; the partitions spread over every worker."""
        await wait_for_workers(self.settings, set(self.names), deadline_s=180)
        await publisher.run(asyncio.Event(), count=self.options.graphs)
        await publisher.settle(60)
        await wait_for_turns(client, {g: 1 for g in publisher.status}, deadline_s=180)
        for name in self.names:  # the RSS is compared from the load's start: what loads once has loaded
            await asyncio.to_thread(wait_until_warm, self.fleet.web_ports[name])
        self.graphs = set(publisher.status)

    async def _load(self, client: MemoryClient, kafka: Any, publisher: Publisher, asker: Asker,
                    schedule: list[Planned]) -> None:
        self.started = time.monotonic()
        stop, sampling = asyncio.Event(), asyncio.Event()
        tasks = [asyncio.create_task(publisher.run(stop)), asyncio.create_task(asker.run(stop)),
                 asyncio.create_task(self._sample_rss(sampling))]
        faults = asyncio.create_task(self._faults(client, kafka, publisher, schedule))
        try:
            await asyncio.sleep(self.options.duration_s)
            # The load goes on through the fault under way (and, `every_kind`, the kinds still owed),
            # so that the queries around it measure it.
            while (self._kinds_owed() or self._fault_under_way()) and not faults.done():
                await asyncio.sleep(0.5)
            stop.set()
            self.load_s = self.clock()
            await faults  # a fault under way is finished, and recovered from
            await asyncio.gather(*tasks[:2])  # each user's last query answered, or its attempt over
            await publisher.settle(60)
        finally:
            stop.set()
            sampling.set()
            faults.cancel()
            await asyncio.gather(*tasks, faults, return_exceptions=True)

    async def _sample_rss(self, stop: asyncio.Event) -> None:
        pids = {name: self.fleet.workers[name].pid for name in self.names}
        while not stop.is_set():
            for name in self.names:
                worker = self.fleet.workers.get(name)
                if worker is not None and worker.pid != pids[name]:
                    pids[name] = worker.pid
                    self.starts.append([self.clock(), name, worker.pid])
                mib = self.fleet.worker_rss_mib(name)
                if mib is not None:
                    self.rss[name].append([round(self.clock(), 1), round(mib, 1)])
            try:
                await asyncio.wait_for(stop.wait(), self.options.rss_every_s)
            except asyncio.TimeoutError:
                pass

    async def _faults(self, client: MemoryClient, kafka: Any, publisher: Publisher, schedule: list[Planned]) -> None:
        for fault in schedule:
            wait = fault.at_s - self.clock()
            if wait > 0:
                await asyncio.sleep(wait)
            if self.clock() >= self.options.duration_s and not self._kinds_owed():
                return  # the load is over: the faults planned past it are not done
            record = FaultRecord(fault.kind, target(fault), self.clock())
            self.faults.append(record)
            if fault.kind == "bad_records":
                burst = bad_records(sorted(publisher.status), self.options.bad_per_kind, _now)
                sent = await send_bad(self.settings, kafka, burst)
                self.bad.extend(sent)
                record.details["sent"] = len(sent)
                record.details["committed"] = await committed_past(self.settings, sent, self.options.recovery_timeout_s)
            else:
                await asyncio.to_thread(act, self.fleet, fault, record)
            record.done_s = self.clock()
            record.recovered_s = await self._recovered(client, record)
            record.details["recoveries"] = await asyncio.to_thread(self.fleet.recoveries)
            record.over = True

    def _fault_under_way(self) -> bool:
        return bool(self.faults) and not self.faults[-1].over

    def _kinds_owed(self) -> bool:
        return self.options.every_kind and bool(set(KINDS) - {f.kind for f in self.faults})

    async def _recovered(self, client: MemoryClient, record: FaultRecord) -> float | None:
        """When every worker is ready, the partitions spread over every worker, and
        every graph answers a stats query within the query timeout (None: not within
        the recovery timeout). What was awaited, each time it changed, goes to
        `record.details["awaiting"]`: [seconds, what].

        Not digest queries: a digest hashes every graph of a partition on the
        worker's event loop (about 2 s a partition once the graphs hold 1,200
        turns each), so probing with them every few seconds starved the very
        queries whose recovery it awaited."""
        deadline = time.monotonic() + self.options.recovery_timeout_s
        awaiting: list[list[Any]] = record.details.setdefault("awaiting", [])
        while time.monotonic() < deadline:
            waiting_on = await asyncio.to_thread(self.fleet.not_ready)
            if not waiting_on:
                silent = await self._graphs_not_answering(client)
                if not silent:
                    return self.clock()
                waiting_on = f"{len(silent)} graph(s) not answering within {self.options.query_timeout_s:g} s, e.g. {silent[:3]}"
            if not awaiting or awaiting[-1][1] != waiting_on:
                awaiting.append([round(self.clock(), 1), waiting_on])
            await asyncio.sleep(0.5)
        return None

    async def _graphs_not_answering(self, client: MemoryClient) -> list[str]:
        async def answers(graph: str) -> bool:
            try:
                return isinstance(await client.stats(graph, top=0, timeout_s=self.options.query_timeout_s), StatsReply)
            except QueryTimeout:
                return False

        graphs = sorted(self.graphs)
        return [g for g, ok in zip(graphs, await asyncio.gather(*(answers(g) for g in graphs))) if not ok]

    async def _gather(self, client: MemoryClient, publisher: Publisher, asker: Asker) -> SoakRecords:
        """After the load: every worker running, every acknowledged turn awaited, then what the graphs hold."""
        died = self.fleet.dead_workers()
        for name in self.names:
            if name not in self.fleet.workers or name in died:
                self.fleet.start_worker(name)
        offered = publisher.offered()
        acked = {g: sum(1 for s in ids.values() if s == ACKED) for g, ids in offered.items()}
        drained = True
        try:
            await wait_for_turns(client, acked, deadline_s=self.options.drain_timeout_s, poll_s=0.2)
        except QueryTimeout:
            drained = False  # some turn never came: the reconciliation says which
        self.drained = drained
        self.died = died
        graphs = {g: await self._graph_counts_retried(client, g, list(ids)) for g, ids in offered.items()}
        differences, verify_error = [], None
        try:
            result = await replay(self.settings, self.fleet.home / "replayed", None, Selection(), verify=True,
                                  from_beginning=True)
            self.replayed_graphs = sum(1 for d in result.digests if d.active)
            differences = result.differences or []
        except (StreamsError, ReplayError) as err:  # a verification that cannot finish fails the run, in one line
            verify_error = f"{type(err).__name__}: {err}"
            print(f"soak: the digests could not be verified: {verify_error}", file=sys.stderr)
        return SoakRecords(
            offered=offered, graphs=graphs, digest_differences=differences, verify_error=verify_error,
            bad_sent=self.bad,
            dead_letters=await self._dead_letters(), attempts=asker.attempts,
            query_timeout_s=self.options.query_timeout_s,
            not_recovered=[f"{f.kind} at {f.started_s:.0f} s" for f in self.faults if f.recovered_s is None],
        )

    async def _graph_counts_retried(self, client: MemoryClient, graph: str, turn_ids: list[str],
                                    attempts: int = 3) -> GraphCounts:
        """`_graph_counts`, asked again after a timeout; a graph that never answers is
        a failure of the run (and holds nothing: its turns are counted as lost)."""
        for _ in range(attempts):
            try:
                return await self._graph_counts(client, graph, turn_ids)
            except QueryTimeout:
                continue
        self.unanswered_graphs.append(graph)
        return GraphCounts(set(), 0, 0)

    async def _graph_counts(self, client: MemoryClient, graph: str, turn_ids: list[str]) -> GraphCounts:
        stats = await client.stats(graph, top=0, timeout_s=30)
        held: set[str] = set()
        for i in range(0, len(turn_ids), PASSAGES_ASKED):
            reply = await client.passages(graph, turn_ids[i : i + PASSAGES_ASKED], timeout_s=30)
            if isinstance(reply, PassagesReply):
                held.update(p.turn_id for p in reply.passages)
        if not isinstance(stats, StatsReply):
            return GraphCounts(held, 0, 0)
        return GraphCounts(held, stats.passages, stats.turns)

    async def _dead_letters(self) -> list[tuple[int, int, str]]:
        """(partition, offset, reason) of every dead letter about the turns topic."""
        topic, found = self.settings.dlq_topic, []
        async with log_reader(self.settings) as reader:
            partitions = await reader.partitions(topic)
            for partition, (start, end) in (await reader.bounds(topic, partitions)).items():
                async for batch in reader.read(topic, partition, start, end):
                    for record in batch:
                        letter = DeadLetter.model_validate_json(record.value)
                        if letter.topic == self.settings.turns_topic:
                            found.append((letter.partition, letter.offset, letter.reason))
        return found

    def _figures(self, records: SoakRecords, asker: Asker, schedule: list[Planned]) -> dict[str, Any]:
        o = self.options
        figures: dict[str, Any] = {
            "duration_s": o.duration_s, "rate_turns_per_s": o.rate, "queries_per_s": o.queries_per_s,
            "graphs": o.graphs, "workers": o.workers, "brokers": len(self.fleet.cluster.nodes),
            "fault_every_s": o.fault_every_s, "seed": o.seed, "query_timeout_s": o.query_timeout_s,
            "load_s": round(self.load_s, 1),
        }
        figures.update(reconcile(records))
        failures = figures["failures"]
        if self.died:
            failures.append(f"worker(s) ended by themselves: {self.died}")
        if self.unanswered_graphs:
            failures.append(f"graph(s) not answering at the end (their turns counted as lost): {self.unanswered_graphs}")
        if not self.drained:
            failures.append(f"not every acknowledged turn applied within {o.drain_timeout_s:g} s of the end")
        figures["faults_planned"] = len(schedule)
        figures["fault_kinds_done"] = sorted({f.kind for f in self.faults})
        figures["fault_kinds_missing"] = sorted(set(KINDS) - {f.kind for f in self.faults})
        figures.update(query_figures(asker.attempts, asker.asks, self.faults, o.settle_s))
        figures["faults"] = [fault_figures(f, asker.asks, o.settle_s) for f in self.faults]
        figures["longest_unanswered_s_by_kind"] = {
            kind: max(f["longest_unanswered_s"] for f in figures["faults"] if f["kind"] == kind)
            for kind in figures["fault_kinds_done"]
        }
        figures["replayed_graphs"] = self.replayed_graphs
        figures["worker_starts"] = self.starts
        figures["rss_mib"] = self.rss
        recoveries = [f.recovered_s for f in self.faults if f.recovered_s is not None]
        figures["rss_summary"] = rss_summary(self.rss, self.starts, recoveries)
        figures["ok"] = not failures
        return figures


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def in_any(t: float, windows: list[tuple[float, float]]) -> bool:
    return any(start <= t <= end for start, end in windows)


def query_figures(attempts: list[Attempt], asks: list[Ask], faults: list[FaultRecord],
                  settle_s: float) -> dict[str, Any]:
    """Success and latency of the query attempts in and out of the fault windows."""
    windows = [f.window(settle_s) for f in faults]
    out: dict[str, Any] = {"query_attempts": len(attempts), "queries_asked": len(asks)}
    for name, inside in (("outside_faults", False), ("in_faults", True)):
        chosen = [a for a in attempts if in_any(a.sent_s, windows) == inside]
        answered = [a.took_s * 1000 for a in chosen if a.outcome == "answered"]
        out[f"query_success_{name}"] = round(len(answered) / len(chosen), 4) if chosen else None
        out[f"query_p50_ms_{name}"] = round(percentile(answered, 0.5), 1) if answered else None
        out[f"query_p99_ms_{name}"] = round(percentile(answered, 0.99), 1) if answered else None
        out[f"query_attempts_{name}"] = len(chosen)
    out["longest_unanswered_s"] = round(max(a.wait_s for a in asks), 2) if asks else None
    slowest = sorted(asks, key=lambda a: -a.wait_s)[:10]
    # An ask not answered was given up when the load stopped: its wait is a lower bound.
    out["slowest_asks"] = [[a.graph, round(a.first_s, 1), round(a.wait_s, 2), a.answered] for a in slowest]
    out["unanswered_outside_faults"] = [[round(a.sent_s, 1), round(a.took_s, 2), a.outcome] for a in attempts
                                        if a.outcome != "answered" and not in_any(a.sent_s, windows)][:100]
    return out


def fault_figures(fault: FaultRecord, asks: list[Ask], settle_s: float) -> dict[str, Any]:
    """A fault, and the longest a query first asked in its window waited for its answer
    (or, not answered, until the load stopped)."""
    start, end = fault.window(settle_s)
    waits = [a.wait_s for a in asks if start <= a.first_s <= end]
    return {
        "kind": fault.kind, "target": fault.target, "at_s": round(fault.started_s, 1),
        "done_s": round(fault.done_s, 1),
        "recovered_s": round(fault.recovered_s, 1) if fault.recovered_s is not None else None,
        "longest_unanswered_s": round(max(waits), 2) if waits else 0.0,
        **fault.details,
    }


def rss_summary(
    rss: dict[str, list[list[float]]], starts: list[list[Any]], recoveries: Sequence[float] = (), warm_s: float = WARM_S,
) -> dict[str, Any]:
    """Per worker: the longest stretch one process ran, and its RSS once it
    had warmed up (its first sample for the first process, started and
    warmed up before the load; for one started during the soak, from
    `warm_s` after its start or from the first recovery after it, every
    worker ready and every graph answering, whichever is later: a slow
    start is still loading its lexicons and catching up 15 s in), at its
    peak and at its end."""
    out = {}
    for name, samples in rss.items():
        cuts = [0.0, *sorted(s[0] for s in starts if s[1] == name), float("inf")]
        stretches = [[s for s in samples if a <= s[0] < b] for a, b in zip(cuts, cuts[1:])]
        warm = [[s for s in stretch if s[0] >= _warm_from(cut, recoveries, warm_s)] for cut, stretch in zip(cuts, stretches)]
        longest = max(warm, key=lambda s: (s[-1][0] - s[0][0]) if s else -1)
        if len(longest) < 2:
            continue
        out[name] = {"from_s": longest[0][0], "to_s": longest[-1][0], "first_mib": longest[0][1],
                     "peak_mib": max(s[1] for s in longest), "last_mib": longest[-1][1]}
        # The goal: after two minutes, within 10 % of the level then.
        later = [s for s in longest if s[0] >= longest[0][0] + LEVEL_AT_S]
        if later:
            out[name]["level_at_2_min_mib"] = later[0][1]
            out[name]["peak_after_2_min_ratio"] = round(max(s[1] for s in later) / later[0][1], 3)
    return out


def _warm_from(start_s: float, recoveries: Sequence[float], warm_s: float) -> float:
    """When a worker process started at `start_s` is warm (the first one, at 0: from the start)."""
    if start_s <= 0:
        return 0.0
    after = [r for r in recoveries if r >= start_s]
    return max(start_s + warm_s, min(after, default=start_s))


def print_figures(figures: dict[str, Any], write: Callable[[str], None] = print) -> None:
    """The headline figures, one a line (the JSON has everything)."""
    for name in ("ok", "turns_offered", "turns_acknowledged", "turns_applied", "turns_lost", "turns_applied_twice",
                 "turns_unacknowledged", "turns_unacknowledged_applied", "digests_equal", "replayed_graphs",
                 "bad_records_sent", "bad_records_dead_lettered", "query_success_outside_faults",
                 "query_p50_ms_outside_faults", "query_p99_ms_outside_faults", "query_success_in_faults",
                 "query_p50_ms_in_faults", "query_p99_ms_in_faults", "longest_unanswered_s_by_kind",
                 "fault_kinds_missing", "rss_summary"):
        write(f"{name:>32}: {figures.get(name)}")
    for fault in figures["faults"]:
        write(f"{'fault':>32}: {fault}")
    for failure in figures["failures"]:
        write(f"{'FAILURE':>32}: {failure}")
