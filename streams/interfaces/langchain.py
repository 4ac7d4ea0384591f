"""The memory as LangChain and LangGraph know memories: a retriever and a store.

Installed with the extra `emgas[langchain]` (langchain-core, langgraph).

`EmgasRetriever` is a LangChain retriever over one graph: `invoke(query)`
spreads activation from the query's concepts and returns the passages it
reaches as `Document`s (page_content: the passage; metadata: turn_id,
speaker, timestamp as ISO 8601, score, and the concepts whose activation
found the passages, best first).

`EmgasStore` is a LangGraph long-term memory store (`BaseStore`):

- a namespace is a graph: `("users", "alice")` is the graph `users/alice`
  (parts joined with "/"; a part that is empty or holds a "/" or a "."
  is refused with an `InvalidNamespaceError`, a `ValueError`);
- an item is a turn: `put(ns, key, {"text": ..., "speaker": ...})`
  publishes a turn whose id is the key (the text is `value["text"]`, else
  `value["content"]`, else the value as JSON; other fields are not kept)
  and returns once the graph holds it; `get` returns its text, speaker,
  concepts and timestamp;
- `search(ns, query=...)` spreads activation in that one graph (the
  namespace is the graph, not a prefix of several) and returns its
  passages with their activation as `score`; a search without a query is
  refused (`NotImplementedError`): the memory ranks by activation, it has
  no listing of its passages; `filter` is refused too; `limit + offset`
  is at most 1000 (the most passages one activation query returns);
- `delete` forgets the item exactly, as `emgas forget` does;
- `list_namespaces` lists the graphs the live workers hold (a graph
  whose turns were all forgotten is gone, so it is not listed).

Updating a key is an add and a forget: the memory never takes a turn id
again once it held it (a turn published twice changes the graph once; a
forgotten turn stays forgotten, also in replays), so each put of a key is
a new revision with its own turn id, `key#r` and the time in nanoseconds
(20 digits), and the older revisions are forgotten once the new one is
applied; a reader sees the old value or the new one, never none. The
worker finds a key's revisions by turn id prefix. A turn added outside the
store whose id is the key is found too. Keys that end like a revision are
refused.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
from collections.abc import Coroutine, Iterable, Mapping
from typing import Any, TypeVar

from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langgraph.store.base import (
    BaseStore, GetOp, InvalidNamespaceError, Item, ListNamespacesOp, MatchCondition, Op, PutOp, Result, SearchItem,
    SearchOp,
)
from pydantic import ConfigDict, Field, PrivateAttr

from emgas.processors.events import DigestReply
from emgas.streams.interfaces.client import MemoryClient
from emgas.streams.interfaces.memory import AsyncMemory, Hit, LoopThread, MemoryApiError, SearchResult
from emgas.streams.settings import Settings

T = TypeVar("T")

SEPARATOR = "/"  # between the parts of a namespace in its graph id
MAX_GRAPH_CHARS = 256  # graph ids are at most 256 characters
REVISION = "#r"  # between a key and its revision's time in a turn id
REVISION_DIGITS = 20
REVISION_END = re.compile(r"(?s).*#r[0-9]{20}")
MAX_PASSAGES = 1000  # the most passages one activation query returns


# -- clients: one AsyncMemory per event loop -----------------------------------


class _Clients:
    """The memory clients of one adapter.

    A Kafka client belongs to the event loop it was started on, so async
    callers get an `AsyncMemory` started lazily on their running loop and
    reused while it runs; sync callers run the same async code on a loop
    this object keeps in a thread (as `Memory` does), so sync and async
    paths share one implementation and sync calls work where a loop is
    already running (a notebook).
    """

    def __init__(self, settings: Settings, wait_s: float) -> None:
        self.settings = settings
        self.wait_s = wait_s
        self._lock = threading.Lock()
        self._started: dict[asyncio.AbstractEventLoop, asyncio.Task[AsyncMemory]] = {}
        self._background: LoopThread | None = None

    async def memory(self) -> AsyncMemory:
        """The memory of the running loop, started on first use (and again
        after a failed start, so a broker that comes up later is found)."""
        loop = asyncio.get_running_loop()
        with self._lock:
            for other in [lp for lp in self._started if lp.is_closed()]:
                del self._started[other]  # its transports died with it
            task = self._started.get(loop)
            if task is None or (task.done() and (task.cancelled() or task.exception() is not None)):
                task = self._started[loop] = loop.create_task(self._start())
        return await asyncio.shield(task)

    async def _start(self) -> AsyncMemory:
        memory = AsyncMemory(settings=self.settings, wait_s=self.wait_s)
        return await memory.__aenter__()

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run `coroutine` to its end on this object's loop thread; blocks."""
        return self._background_loop().run(coroutine)

    def _background_loop(self) -> LoopThread:
        with self._lock:
            if self._background is None:
                self._background = LoopThread("emgas-langchain")
            return self._background

    def close(self) -> None:
        """Stop every client this object started, then its loop thread.

        A client on the caller's own running loop cannot be awaited here:
        its closing is scheduled on that loop (use `aclose` to wait for it)."""
        try:
            current = asyncio.get_running_loop()
        except RuntimeError:
            current = None
        for loop, closing in self._closings():
            if loop is current:
                loop.create_task(closing)
            else:
                asyncio.run_coroutine_threadsafe(closing, loop).result()
        self._stop_background()

    async def aclose(self) -> None:
        """`close`, waiting for the client on the running loop too."""
        current = asyncio.get_running_loop()
        for loop, closing in self._closings():
            if loop is current:
                await closing
            else:
                await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(closing, loop))
        await asyncio.to_thread(self._stop_background)

    def _closings(self) -> list[tuple[asyncio.AbstractEventLoop, Coroutine[Any, Any, None]]]:
        """(loop, coroutine closing its client) for each client still reachable."""
        with self._lock:
            started, self._started = self._started, {}
        return [(loop, _close_started(task)) for loop, task in started.items() if loop.is_running()]

    def _stop_background(self) -> None:
        with self._lock:
            background, self._background = self._background, None
        if background is not None:
            background.stop()


async def _close_started(task: asyncio.Task[AsyncMemory]) -> None:
    """Close the memory `task` started, if it did."""
    try:
        memory = await task
    except BaseException:  # noqa: BLE001 - never started: nothing to close
        return
    await memory.__aexit__(None, None, None)


# -- the retriever -------------------------------------------------------------


class EmgasRetriever(BaseRetriever):
    """A LangChain retriever over one graph of the memory.

    `EmgasRetriever(graph="alice", k=5).invoke("Who gave me the starter?")`
    returns up to `k` passages, best first; `invoke(query, k=3)` overrides
    `k` for one call. A graph that holds no turns yet gives no documents.
    A retrieval reinforces the concepts it activated, as remembering does
    (`reinforce=False`: it does not). Call `close()` (or `await aclose()`)
    when done: it stops the Kafka clients.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    graph: str
    """The graph searched: one per user (or agent); nothing is shared between graphs."""
    k: int = Field(default=5, ge=1, le=MAX_PASSAGES)
    """How many passages a call returns at most."""
    settings: Settings = Field(default_factory=Settings)
    """Where the memory is (broker, topics); default: from EMGAS_* environment variables."""
    reinforce: bool = True
    """Whether a retrieval strengthens the concepts it activated."""
    wait_s: float = 30.0
    """How long a call waits for the memory (its client's timeouts)."""

    _clients: _Clients | None = PrivateAttr(default=None)
    _clients_lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, k: int | None = None
    ) -> list[Document]:
        """Blocking: the async search, run on the retriever's loop thread."""
        return self._memory_clients().run(self._search(query, k))

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, k: int | None = None
    ) -> list[Document]:
        return await self._search(query, k)

    async def _search(self, query: str, k: int | None) -> list[Document]:
        memory = await self._memory_clients().memory()
        try:
            found = await memory.search(query, self.k if k is None else k, graph=self.graph, reinforce=self.reinforce)
        except MemoryApiError as err:
            if err.code == "graph_not_found":  # a user with no memories yet
                return []
            raise
        return documents(found, self.graph)

    def _memory_clients(self) -> _Clients:
        with self._clients_lock:
            if self._clients is None:
                self._clients = _Clients(self.settings, self.wait_s)
            return self._clients

    def close(self) -> None:
        """Stop the retriever's Kafka clients (it starts them again if used)."""
        with self._clients_lock:
            clients, self._clients = self._clients, None
        if clients is not None:
            clients.close()

    async def aclose(self) -> None:
        """`close` from async code: waits for the client on the running loop."""
        with self._clients_lock:
            clients, self._clients = self._clients, None
        if clients is not None:
            await clients.aclose()


def documents(found: SearchResult, graph: str) -> list[Document]:
    """One Document per passage; every one carries the concepts whose
    activation found the passages (the query's, best first): the memory
    ranks the passages by what those concepts reached, not by similarity."""
    concepts = [text for text, _ in found.concepts]
    return [
        Document(
            id=hit.turn_id,
            page_content=hit.text,
            metadata={
                "graph": graph, "turn_id": hit.turn_id, "speaker": hit.speaker,
                "timestamp": hit.timestamp.isoformat(), "score": hit.score, "concepts": concepts,
            },
        )
        for hit in found.hits
    ]


# -- the store: namespaces, keys and revisions -----------------------------------


def graph_of(namespace: tuple[str, ...]) -> str:
    """The graph of a namespace: its parts joined with "/".

    Refused (`InvalidNamespaceError`, a ValueError): an empty namespace; a
    part that is not a string, is empty, or holds "/" (two namespaces would
    share a graph) or "." (LangGraph's rule)."""
    if not namespace:
        raise InvalidNamespaceError("a namespace names a graph: it cannot be empty")
    for part in namespace:
        if not isinstance(part, str) or not part.strip():
            raise InvalidNamespaceError(f"namespace {namespace!r}: every part must be a non-blank string")
        if SEPARATOR in part or "." in part:
            raise InvalidNamespaceError(
                f"namespace {namespace!r}: part {part!r} holds {SEPARATOR!r} or '.'; the namespace is the graph "
                f"{SEPARATOR!r}.join(parts), so its parts cannot"
            )
    graph = SEPARATOR.join(namespace)
    if len(graph) > MAX_GRAPH_CHARS:
        raise InvalidNamespaceError(f"namespace {namespace!r}: its graph id would pass {MAX_GRAPH_CHARS} characters")
    return graph


def namespace_of(graph: str) -> tuple[str, ...]:
    return tuple(graph.split(SEPARATOR))


def checked_key(key: str) -> str:
    """The key, if it cannot be read as a revision of another key."""
    if not key or not key.strip():
        raise ValueError("a key cannot be blank")
    if REVISION_END.fullmatch(key):
        raise ValueError(f"key {key!r} ends like a revision's turn id ('#r' and 20 digits); choose another")
    return key


def revision_id(key: str, at_ns: int) -> str:
    """The turn id of the revision of `key` put at `at_ns` (ns since 1970): later sorts after."""
    return f"{key}{REVISION}{at_ns:0{REVISION_DIGITS}d}"


def is_revision_of(turn: str, key: str) -> bool:
    """Whether `turn` is the key itself or one of its revisions (not of a longer key)."""
    tail = turn[len(key):]
    return turn.startswith(key) and (tail == "" or (
        tail.startswith(REVISION) and len(tail) == len(REVISION) + REVISION_DIGITS and tail[len(REVISION):].isdigit()
    ))


def key_of(turn: str) -> str:
    """The key a turn id belongs to (a turn not made by this store: its id)."""
    return turn[: -len(REVISION) - REVISION_DIGITS] if REVISION_END.fullmatch(turn) else turn


def text_of(value: Mapping[str, Any]) -> str:
    """What the memory remembers of a value: its text or content, else the value as JSON."""
    for field in ("text", "content"):
        if isinstance(value.get(field), str):
            return value[field]
    return json.dumps(value, sort_keys=True, default=str)


def item_value(hit: Hit) -> dict[str, Any]:
    return {"text": hit.text, "speaker": hit.speaker, "concepts": list(hit.concepts),
            "timestamp": hit.timestamp.isoformat()}


def matches(namespace: tuple[str, ...], condition: MatchCondition) -> bool:
    """LangGraph's namespace match: a prefix or suffix path, "*" matching any one part."""
    path = condition.path
    if len(namespace) < len(path):
        return False
    pairs = zip(namespace, path) if condition.match_type == "prefix" else zip(reversed(namespace), reversed(path))
    return all(wanted in ("*", part) for part, wanted in pairs)


class EmgasStore(BaseStore):
    """A LangGraph long-term memory store over the memory (see the module's notes).

    ```python
    store = EmgasStore(Settings())
    store.put(("users", "alice"), "starter", {"text": "Mina gave me a sourdough starter"})
    store.search(("users", "alice"), query="who gave me the starter?", limit=3)
    ```

    Use with `with` / `async with`, or call `close()` / `aclose()`. `index`
    is ignored (the memory indexes every text by its concepts) and `ttl`
    is refused (`supports_ttl` is False): the memory forgets by decay.
    """

    supports_ttl = False

    def __init__(self, settings: Settings | None = None, *, reinforce: bool = True, wait_s: float = 30.0) -> None:
        """`reinforce`: whether a search strengthens what it activated;
        `wait_s`: how long a put or delete waits for the graph to apply it."""
        self.settings = settings or Settings()
        self.reinforce = reinforce
        self._clients = _Clients(self.settings, wait_s)

    # -- BaseStore ---------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """The operations in order, blocking (run on the store's loop thread)."""
        return self._clients.run(self.abatch(list(ops)))

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """The operations in order: a put is applied before the next op reads."""
        memory = await self._clients.memory()
        return [await self._run(memory, op) for op in ops]

    async def _run(self, memory: AsyncMemory, op: Op) -> Result:
        if isinstance(op, GetOp):
            return await self._get(memory, graph_of(op.namespace), op.namespace, checked_key(op.key))
        if isinstance(op, PutOp):
            graph, key = graph_of(op.namespace), checked_key(op.key)
            if op.value is None:
                await self._delete(memory, graph, key)
            else:
                await self._put(memory, graph, key, op.value)
            return None
        if isinstance(op, SearchOp):
            return await self._search(memory, op)
        if isinstance(op, ListNamespacesOp):
            return await self._list_namespaces(op)
        raise TypeError(f"EmgasStore does not know the operation {op!r}")

    # -- the operations ----------------------------------------------------

    async def _get(self, memory: AsyncMemory, graph: str, namespace: tuple[str, ...], key: str) -> Item | None:
        held = await self._held(memory, graph, key)
        if not held:
            return None
        hit = held[-1]
        return Item(value=item_value(hit), key=key, namespace=namespace,
                    created_at=hit.timestamp, updated_at=hit.timestamp)

    async def _put(self, memory: AsyncMemory, graph: str, key: str, value: Mapping[str, Any]) -> None:
        """A new revision of the key, then the older ones forgotten: readers
        see the old value or the new one, never none. A put of the value the
        key holds changes nothing (a forget re-folds the graph: not for nothing)."""
        text, speaker = text_of(value), str(value.get("speaker") or "user")
        held = await self._held(memory, graph, key)
        if held and (held[-1].text, held[-1].speaker) == (text, speaker) and len(held) == 1:
            return
        revision = revision_id(key, max([time.time_ns(), *(_revision_ns(h.turn_id) + 1 for h in held)]))
        await memory.add([{"id": revision, "text": text, "speaker": speaker}], graph=graph)
        if held:
            await memory.delete([h.turn_id for h in held], graph=graph)

    async def _delete(self, memory: AsyncMemory, graph: str, key: str) -> None:
        """Forget every revision of the key the graph holds (exactly, as `emgas forget`)."""
        held = await self._held(memory, graph, key)
        if held:
            await memory.delete([h.turn_id for h in held], graph=graph)

    async def _search(self, memory: AsyncMemory, op: SearchOp) -> list[SearchItem]:
        """Spread activation from the query in the namespace's graph; the
        passages best first, each with the concepts it mentions (as `get`)."""
        if not op.query:
            raise NotImplementedError(
                "EmgasStore.search needs a query: the memory ranks passages by the activation a query's "
                "concepts spread; it has no listing of a namespace's items (use get for a known key)"
            )
        if op.filter:
            raise NotImplementedError("EmgasStore.search does not filter: the memory ranks by activation only")
        graph = graph_of(op.namespace_prefix)
        if op.limit < 1 or op.offset >= MAX_PASSAGES:
            return []
        try:
            found = await memory.search(op.query, min(op.limit + op.offset, MAX_PASSAGES), graph=graph,
                                        reinforce=self.reinforce)
        except MemoryApiError as err:
            if err.code == "graph_not_found":
                return []
            raise
        hits = found.hits[op.offset:op.offset + op.limit]
        held = await asyncio.gather(*(memory.get(h.turn_id, graph=graph) for h in hits))
        return [
            SearchItem(namespace=op.namespace_prefix, key=key_of(hit.turn_id), value=item_value(full),
                       created_at=hit.timestamp, updated_at=hit.timestamp, score=hit.score)
            for hit, full in zip(hits, held) if full is not None  # forgotten since it was ranked: gone
        ]

    async def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        """The graphs the live workers hold, as namespaces."""
        async with MemoryClient(self.settings) as client:
            replies = await client.digests()
        graphs = {g.graph_id for r in replies if isinstance(r, DigestReply) for g in r.graphs}
        spaces = [namespace_of(g) for g in graphs]
        spaces = [ns for ns in spaces if all(matches(ns, c) for c in op.match_conditions or ())]
        if op.max_depth is not None:
            spaces = [ns[:op.max_depth] for ns in spaces]
        return sorted(set(spaces))[op.offset:op.offset + op.limit]

    # -- revisions -----------------------------------------------------------

    async def _held(self, memory: AsyncMemory, graph: str, key: str) -> list[Hit]:
        """The revisions of the key the graph holds, oldest first (one, but
        for a put interrupted between its add and its forget), found by
        turn id prefix; the key itself first (a turn added with that id
        outside this store)."""
        try:
            found = await memory.passages([key], prefix=key + REVISION, graph=graph)
        except MemoryApiError as err:
            if err.code == "graph_not_found":
                return []
            raise
        return sorted((h for h in found if is_revision_of(h.turn_id, key)), key=lambda h: _revision_ns(h.turn_id))

    # -- lifetime ------------------------------------------------------------

    def close(self) -> None:
        """Stop the store's Kafka clients and its loop thread."""
        self._clients.close()

    async def aclose(self) -> None:
        await self._clients.aclose()

    def __enter__(self) -> "EmgasStore":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> "EmgasStore":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def _revision_ns(turn: str) -> int:
    """The time of a revision (0: the key itself, a turn added outside the store)."""
    return int(turn[-REVISION_DIGITS:]) if REVISION_END.fullmatch(turn) else 0


__all__ = ["EmgasRetriever", "EmgasStore", "graph_of", "namespace_of"]
