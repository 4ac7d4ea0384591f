"""The memory as agent code knows such memories: add, search, get, delete, history.

`AsyncMemory` (async) and `Memory` (plain, blocking calls) wrap
`MemoryClient`, so code that is not Kafka code can use the memory. Names
follow the memory APIs agent developers already use (mem0's `add` /
`search` / `get` / `delete` / `delete_all` / `history`, scoped by a user):

| there | here |
|---|---|
| `user_id` (or `agent_id`, `run_id`) | `graph`: one graph per user; nothing is shared between graphs |
| a memory (an extracted fact) | a turn: the passage as it was said, with its speaker and time |
| `add(messages)` | `add(text or messages)`: one turn per message, applied in milliseconds, no LLM |
| `search(query, limit)` | `search(query, k)`: spreading activation; passages with the concepts that led to them |
| `delete(memory_id)`, `delete_all(user_id)` | forget the turns, exactly (the graph becomes one that never saw them) |
| `history(memory_id)` | `history(concept)`: every event that changed a concept (`emgas explain`) |

A call names its graph or uses the one the memory was made for; never a
guessed one. The memory's refusals come back as `MemoryApiError` with the
reason code of the worker's reply (e.g. `graph_not_found`).
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, Awaitable, Iterable, TypeVar

from pydantic import ValidationError

from emgas.processors.events import (
    ActivationReply, EmptyReason, ErrorReply, HeldPassage, PassagesReply, Reply, StatsReply, Turn,
)
from emgas.replay.explain import Step
from emgas.streams.interfaces.client import MemoryClient, forget_request
from emgas.streams.errors import QueryTimeout, StreamsError
from emgas.streams.settings import Settings

T = TypeVar("T")
POLL_S = 0.05  # between two looks for turns just added


class MemoryApiError(StreamsError):
    """The memory refused or could not do what was asked; `code` says why."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


@dataclass(frozen=True)
class Hit:
    """A passage found by `search` (score: its activation) or `get` (score None)."""

    turn_id: str
    speaker: str
    text: str
    timestamp: datetime
    score: float | None = None
    concepts: tuple[str, ...] = ()


@dataclass(frozen=True)
class SearchResult:
    """Passages best first, and the concepts whose activation found them (best first)."""

    hits: list[Hit]
    concepts: list[tuple[str, float]]
    # Why `hits` is empty ("no_seeds": no query word is in the memory;
    # "no_passages": what it found leads to no passage held), else None.
    empty: EmptyReason | None = None
    unmatched: list[str] = field(default_factory=list)  # query words not in the memory


def empty_note(empty: EmptyReason | None, unmatched: Iterable[str]) -> str | None:
    """Why a search found no passage, in one sentence an agent can act on (None: it found some)."""
    if empty == "no_seeds":
        words = ", ".join(unmatched) or "(none)"
        return f"no word of the query is in this memory ({words}); ask again in other words"
    if empty == "no_passages":
        return "the concepts found lead to no passage this memory still holds"
    return None


def _checked(reply: Reply, kind: type[T]) -> T:
    if isinstance(reply, ErrorReply):
        raise MemoryApiError(reply.code, reply.message)
    assert isinstance(reply, kind), reply
    return reply


def _turns(messages: str | Iterable[Any], graph: str, speaker: str, session: str | None,
           at: datetime | None) -> list[Turn]:
    """One turn per message: a text, or a dict with `content`/`text` and
    `role`/`speaker` (and an optional `id`); successive messages 1 ms apart."""
    items = [messages] if isinstance(messages, str) else list(messages)
    start = at or datetime.now(timezone.utc)
    turns = []
    for i, item in enumerate(items):
        fields = {"text": item} if isinstance(item, str) else dict(item)
        try:
            turns.append(Turn(
                graph_id=graph, turn_id=str(fields.get("id") or uuid.uuid4().hex),
                speaker=str(fields.get("speaker") or fields.get("role") or speaker),
                text=fields.get("text") or fields.get("content") or "", session_id=session,
                timestamp=start + timedelta(milliseconds=i),
            ))
        except ValidationError as exc:
            first = exc.errors()[0]
            raise MemoryApiError("invalid_turn", f"message {i}: {'.'.join(map(str, first['loc']))}: {first['msg']}") from None
    return turns


async def _ask_passages(
    client: MemoryClient, graph: str, turn_ids: list[str], prefix: str | None = None, timeout_s: float | None = None,
) -> PassagesReply | None:
    """The reply, or None while the graph does not exist yet (its first turn in flight)."""
    try:
        return _checked(await client.passages(graph, turn_ids, prefix, timeout_s), PassagesReply)
    except MemoryApiError as err:
        if err.code == "graph_not_found":
            return None
        raise


async def wait_applied(client: MemoryClient, graph: str, turn_ids: list[str], wait_s: float) -> None:
    """Return once `graph` holds every one of `turn_ids`; MemoryApiError
    `not_applied` if it does not within `wait_s` (a worker down or still
    starting, or a turn sent to the dead-letter topic). A query no worker
    answers yet is asked again until then."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait_s
    waiting = list(turn_ids)
    while waiting:
        remaining = deadline - loop.time()
        try:
            reply = await _ask_passages(client, graph, waiting, timeout_s=max(0.1, min(remaining, client.settings.query_timeout_s)))
        except QueryTimeout:
            reply = None
        waiting = list(reply.missing) if reply is not None else waiting
        if not waiting:
            return
        if loop.time() > deadline:
            raise MemoryApiError("not_applied", f"turns {waiting} of graph {graph!r} not applied within "
                              f"{wait_s:g} s (is a worker running? see emgas.dlq)")
        await asyncio.sleep(POLL_S)


class AsyncMemory:
    """Use as `async with AsyncMemory(graph="alice") as memory: ...`."""

    def __init__(self, graph: str | None = None, settings: Settings | None = None, wait_s: float = 30.0) -> None:
        """`graph`: the graph of calls that name none; `wait_s`: how long `add`
        waits for its turns to be applied, `delete` for its forget."""
        self.graph = graph
        self.settings = settings or Settings()
        self.wait_s = wait_s
        self._client = MemoryClient(self.settings)

    async def __aenter__(self) -> "AsyncMemory":
        await self._client.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._client.__aexit__(*exc)

    def graph_of(self, graph: str | None) -> str:
        """The graph a call is about: the one it names, else this memory's."""
        chosen = graph or self.graph
        if not chosen:
            raise MemoryApiError("no_graph", "name a graph: this memory was made without one")
        return chosen

    async def add(
        self, messages: str | Iterable[Any], *, graph: str | None = None, speaker: str = "user",
        session: str | None = None, timestamp: datetime | None = None, wait: bool = True,
    ) -> list[str]:
        """Publish one turn per message; their turn ids. With `wait`, return
        once the graph holds them all (MemoryApiError `not_applied` if it does
        not within `wait_s`: a worker down, or a turn sent to the dead-letter topic)."""
        turns = _turns(messages, self.graph_of(graph), speaker, session, timestamp)
        await self._client.publish(turns)
        ids = [t.turn_id for t in turns]
        if wait:
            await self._applied(turns[0].graph_id, ids)
        return ids

    async def _applied(self, graph: str, turn_ids: list[str]) -> None:
        await wait_applied(self._client, graph, turn_ids, self.wait_s)

    async def _ask_passages(self, graph: str, turn_ids: list[str], prefix: str | None = None) -> PassagesReply | None:
        """The reply, or None while the graph does not exist yet (its first turn in flight)."""
        return await _ask_passages(self._client, graph, turn_ids, prefix)

    async def search(self, query: str, k: int = 5, *, graph: str | None = None, reinforce: bool = True) -> SearchResult:
        """The `k` passages the query's concepts activate most (a retrieval
        reinforces what it activates, as remembering does; `reinforce=False`: not)."""
        from emgas.processors.events import QueryParams

        try:
            reply = await self._client.ask(self.graph_of(graph), text=query, params=QueryParams(top_passages=k),
                                           reinforce=reinforce)
        except QueryTimeout as err:
            raise MemoryApiError("timeout", str(err)) from None
        answer = _checked(reply, ActivationReply)
        hits = [Hit(p.turn_id, p.speaker, p.text, p.timestamp, p.score) for p in answer.passages]
        return SearchResult(
            hits, [(c.text, c.activation) for c in answer.concepts], answer.empty, list(answer.unmatched)
        )

    async def get(self, turn_id: str, *, graph: str | None = None) -> Hit | None:
        """The passage of a turn, or None if the graph does not hold it."""
        return next(iter(await self.passages([turn_id], graph=graph)), None)

    async def passages(
        self, turn_ids: Iterable[str] = (), *, prefix: str | None = None, graph: str | None = None
    ) -> list[Hit]:
        """The passages the graph holds of these turns, and (`prefix`) of up to
        1,000 turns whose id starts so, in turn id order."""
        reply = await self._ask_passages(self.graph_of(graph), list(turn_ids), prefix)
        held: list[HeldPassage] = sorted(reply.passages, key=lambda p: p.turn_id) if reply is not None else []
        return [Hit(p.turn_id, p.speaker, p.text, p.timestamp, None, p.concepts) for p in held]

    async def delete(self, turn_ids: str | Iterable[str], *, graph: str | None = None) -> int:
        """Forget these turns exactly; returns once the graph has (the forget's log offset)."""
        ids = [turn_ids] if isinstance(turn_ids, str) else list(turn_ids)
        return await self._forget(forget_request(self.graph_of(graph), ids))

    async def delete_all(self, *, graph: str | None = None) -> int:
        """Forget the whole graph."""
        return await self._forget(forget_request(self.graph_of(graph), whole_graph=True))

    async def _forget(self, event: Any) -> int:
        try:
            return await self._client.forget(event, self.wait_s)
        except QueryTimeout as err:
            raise MemoryApiError("timeout", str(err)) from None

    async def history(self, concept: str, *, graph: str | None = None) -> list[Step]:
        """Every event that changed the concept in the graph, oldest first (empty: never held)."""
        from emgas.processors.extract import normalise
        from emgas.replay.explain import explain
        from emgas.streams.interfaces.admin import graph_records

        gid = self.graph_of(graph)
        records = await graph_records(self.settings, gid)
        candidates = list(dict.fromkeys([concept, concept.lower(), normalise(concept, "en")]))
        return explain(records, gid, candidates, self.settings.graph)

    async def stats(self, *, graph: str | None = None, top: int = 10) -> StatsReply:
        """The graph's size and its most mentioned concepts."""
        return _checked(await self._client.stats(self.graph_of(graph), top), StatsReply)


class LoopThread:
    """An event loop run for ever in a daemon thread of its own, for code that
    is not async: `run` blocks until a coroutine ends on it, which also
    works where the caller's thread already runs a loop (a notebook). A
    Kafka client belongs to the loop it was started on, so every call of
    one client goes through the same `LoopThread`."""

    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self._thread.start()

    def run(self, coroutine: Awaitable[T]) -> T:
        """Run `coroutine` to its end on the loop; blocks."""
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result()  # type: ignore[arg-type]

    def stop(self) -> None:
        """Stop the loop, wait for its thread (10 s at most) and close the loop."""
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        self.loop.close()


class Memory:
    """`AsyncMemory` for code that is not async: each call blocks until done.

    It runs its own event loop in a thread, so it also works where a loop
    is already running (a notebook). Connects at once: an unreachable
    broker is an error here, not at the first call.
    """

    def __init__(self, graph: str | None = None, settings: Settings | None = None, wait_s: float = 30.0) -> None:
        self._background = LoopThread("emgas-memory")
        self._memory = AsyncMemory(graph, settings, wait_s)
        try:
            self._call(self._memory.__aenter__())
        except BaseException:
            self._background.stop()
            raise

    @property
    def graph(self) -> str | None:
        return self._memory.graph

    def _call(self, coroutine: Awaitable[T]) -> T:
        return self._background.run(coroutine)

    def add(self, messages: str | Iterable[Any], **options: Any) -> list[str]:
        return self._call(self._memory.add(messages, **options))

    def search(self, query: str, k: int = 5, **options: Any) -> SearchResult:
        return self._call(self._memory.search(query, k, **options))

    def get(self, turn_id: str, **options: Any) -> Hit | None:
        return self._call(self._memory.get(turn_id, **options))

    def passages(self, turn_ids: Iterable[str] = (), **options: Any) -> list[Hit]:
        return self._call(self._memory.passages(turn_ids, **options))

    def delete(self, turn_ids: str | Iterable[str], **options: Any) -> int:
        return self._call(self._memory.delete(turn_ids, **options))

    def delete_all(self, **options: Any) -> int:
        return self._call(self._memory.delete_all(**options))

    def history(self, concept: str, **options: Any) -> list[Step]:
        return self._call(self._memory.history(concept, **options))

    def stats(self, **options: Any) -> StatsReply:
        return self._call(self._memory.stats(**options))

    def close(self) -> None:
        if self._background.loop.is_running():
            try:
                self._call(self._memory.__aexit__(None, None, None))
            finally:
                self._background.stop()

    def __enter__(self) -> "Memory":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
