"""How long graphs cannot answer while workers join and leave: queries sent continuously to every graph.

One loop per graph asks its stats (a request through the queries topic,
like any query) with a short deadline, again and again. A graph's
unavailability around an event is the longest interval between two of its
answers that overlaps the event's window; each interval includes one probe
period (`pause_s` plus a round trip), so it bounds the pause from above.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

from emgas.processors.events import StatsReply
from emgas.streams.interfaces.client import MemoryClient
from emgas.streams.errors import QueryTimeout
from emgas.streams.settings import Settings

HANG_MARGIN_S = 1.0  # a query not back (answered or timed out) this long after its deadline "hung"


@dataclass
class Gap:
    graph: str
    seconds: float
    answered_after: bool  # False: the graph had not answered again when the window closed


@dataclass
class Availability:
    """`async with Availability(settings, graphs) as probe:` ... `probe.longest_gap(t0, t1)`."""

    settings: Settings
    graphs: list[str]
    timeout_s: float = 1.0
    pause_s: float = 0.02
    answers: dict[str, list[float]] = field(default_factory=dict)  # graph -> monotonic times of answers
    asked: int = 0
    timeouts: int = 0
    errors: list[str] = field(default_factory=list)
    longest_wait_s: float = 0.0  # the longest any one query waited, answered or not
    _held: set[str] = field(default_factory=set)  # graphs that have answered with their stats
    _closing: bool = False
    _tasks: list[asyncio.Task] = field(default_factory=list)
    _client: MemoryClient | None = None

    async def __aenter__(self) -> "Availability":
        self._client = await MemoryClient(self.settings).__aenter__()
        self.answers = {g: [] for g in self.graphs}
        self._tasks = [asyncio.create_task(self._probe(g)) for g in self.graphs]
        return self

    async def __aexit__(self, *exc: object) -> None:
        # The probes also end on the flag: on Python 3.11, asyncio.wait_for can swallow a
        # cancellation that races with its result (CPython gh-86296), and a probe that
        # missed its cancel would loop on, leaving this exit (and the bench) waiting forever.
        self._closing = True
        for task in self._tasks:
            task.cancel()
        assert self._client is not None
        try:
            if self._tasks:
                _, pending = await asyncio.wait(self._tasks, timeout=self.timeout_s + HANG_MARGIN_S + 5)
                if pending:
                    raise RuntimeError(f"{len(pending)} probe(s) did not stop")
        finally:
            await self._client.__aexit__(None, None, None)

    async def _probe(self, graph: str) -> None:
        assert self._client is not None
        while not self._closing:
            started = time.monotonic()
            self.asked += 1
            try:
                reply = await self._client.stats(graph, top=0, timeout_s=self.timeout_s)
                if isinstance(reply, StatsReply):
                    self.answers[graph].append(time.monotonic())
                    self._held.add(graph)
                elif reply.code == "graph_not_found" and graph not in self._held:
                    self.answers[graph].append(time.monotonic())  # served, no turn of it yet
                else:  # an error, or a graph that held turns and now is not found
                    self.errors.append(f"{graph}: {reply.code}: {reply.message}")
            except QueryTimeout:
                self.timeouts += 1
            self.longest_wait_s = max(self.longest_wait_s, time.monotonic() - started)
            await asyncio.sleep(self.pause_s)

    @property
    def hung(self) -> bool:
        """Whether any query outlived its deadline (by more than HANG_MARGIN_S)."""
        return self.longest_wait_s > self.timeout_s + HANG_MARGIN_S

    async def until_all_answer(self, since: float, deadline_s: float) -> float:
        """Seconds until every graph has answered after `since` (AssertionError past `deadline_s`)."""
        while True:
            late = [g for g, times in self.answers.items() if not times or times[-1] < since]
            if not late:
                return time.monotonic() - since
            if time.monotonic() - since > deadline_s:
                raise AssertionError(f"{late} did not answer within {deadline_s:g} s")
            await asyncio.sleep(0.05)

    def longest_gap(self, start: float, end: float) -> Gap:
        """The graph with the longest interval between answers that overlaps [start, end]."""
        worst = Gap("", 0.0, True)
        for graph, times in self.answers.items():
            before = [t for t in times if t <= start]
            points = ([before[-1]] if before else [start]) + [t for t in times if start < t <= end]
            gaps = [(b - a, True) for a, b in zip(points, points[1:])] + [(end - points[-1], False)]
            seconds, answered = max(gaps)
            if seconds > worst.seconds:
                worst = Gap(graph, seconds, answered)
        return worst
