"""`emgas mcp`: the memory served to agents over the Model Context Protocol.

A desktop agent starts `emgas mcp --graph alice` and speaks MCP over the
process's stdin/stdout; other agents connect to `emgas mcp --http`
(streamable HTTP, `http://127.0.0.1:8765/mcp`). Either way the server is
one more Kafka client of the memory: one `AsyncMemory`, opened in the
server's lifespan and closed when it ends, against the configured broker.

Five tools: `remember`, `recall`, `forget`, `explain`, `stats`. A call
reaches the graph the server was started for (`--graph`) and the graphs
`--allow` patterns name, no other. Every failure, a refusal included,
comes back as a tool error (`isError`) whose text starts with a reason
code (`graph_not_allowed: ...`, `graph_not_found: ...`), never as a
traceback: the model reads the code and can act on it.

Written against the official SDK, mcp 2 (`MCPServer`, FastMCP's new name).
"""

import inspect
import logging
import signal
import sys
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime
from fnmatch import fnmatchcase
from typing import Annotated, Any, AsyncIterator, Callable, Iterable, TypeVar

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import AwareDatetime, BaseModel, Field, ValidationError

from emgas.processors.errors import CoreError
from emgas.processors import events
from emgas.processors.events import EmptyReason, StatsReply
from emgas.replay.errors import LogUnavailable, ReplayError
from emgas.state.errors import StateError
from emgas.streams.errors import BrokerError, ConfigError, QueryTimeout, RequestError, StreamsError
from emgas.streams.http_auth import asgi_guard, check_exposure
from emgas.streams.interfaces.memory import AsyncMemory, MemoryApiError, empty_note
from emgas.streams.settings import Settings
from emgas.streams.kafka.discovery import wait_for_broker

log = logging.getLogger("emgas.mcp")
F = TypeVar("F", bound=Callable[..., Any])

DEFAULT_PORT = 8765
CONCEPTS_SHOWN = 10  # concepts a recall reports: enough to see why, few enough to read

INSTRUCTIONS = """\
Long-term associative memory of conversations (emgas). Each graph is one
user's or agent's memory; nothing is shared between graphs.
- `remember` what is worth keeping (facts, preferences, events, decisions),
  one turn at a time, as it was said.
- `recall` before answering anything that may depend on earlier
  conversations: it returns the passages the query's concepts activate most.
- `forget` a turn (by the turn id that remember or recall gave) when the user
  asks, or when it is wrong; it is removed exactly, as if never said.
- `explain` tells when and why a concept was created, reinforced, decayed or
  pruned; `stats` how large the memory is and what it is mostly about.
Errors start with a reason code (e.g. `graph_not_found`: nothing was
remembered in that graph yet).
"""


class Refusal(ToolError):
    """A call the server will not do; the text starts with its reason code."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code


@dataclass(frozen=True)
class Access:
    """Which graphs a call may name: the served one, and those the patterns match.

    The server holds the keys to every graph on the broker; this is what
    keeps one user's agent out of the others' memories.
    """

    default: str | None
    allow: tuple[str, ...] = ()

    def resolve(self, graph: str | None) -> str:
        """The graph a call is about (Refusal `no_graph` / `graph_not_allowed`)."""
        if not graph:
            if self.default is None:
                raise Refusal("no_graph", f"name a graph: this server has no default (served: {self.served()})")
            return self.default
        if graph == self.default or any(fnmatchcase(graph, p) for p in self.allow):
            return graph
        raise Refusal("graph_not_allowed", f"graph {graph!r} is not served here (served: {self.served()})")

    def served(self) -> str:
        """The graphs a call may name, in words (for refusals and the `graph` parameter)."""
        patterns = "graphs matching " + ", ".join(repr(p) for p in self.allow) if self.allow else ""
        if self.default is None:
            return patterns
        return f"{self.default!r} and {patterns}" if patterns else f"{self.default!r} only"

    def describe(self) -> str:
        """The `graph` parameter's description: which graphs, and what omitting it means."""
        omitted = f"omit it for {self.default!r}" if self.default else "there is no default: always name one"
        return f"which memory graph (one per user or agent). Served here: {self.served()}; {omitted}."


# Parameters: their descriptions go into the tools' input schemas, for the model to read.

Said = Annotated[str, Field(min_length=1, description="what was said, verbatim or as one self-contained sentence")]
Speaker = Annotated[str, Field(description="who said it, e.g. 'user', 'assistant', or a name")]
Session = Annotated[str | None, Field(
    description="conversation id: turns close together in one session lend each other relevance when recalled")]
SaidAt = Annotated[AwareDatetime | None, Field(description="when it was said, ISO 8601 with a time zone (default: now)")]
Wait = Annotated[bool, Field(description="true: return once recallable; false: return as soon as published")]
Query = Annotated[str, Field(min_length=1, description="what to look for: a question, or keywords (names, topics, things)")]
HowMany = Annotated[int, Field(ge=1, le=50, description="how many passages to return")]
TurnIds = Annotated[list[str] | None, Field(description="the turns to forget (ids from remember or recall)")]
WholeGraph = Annotated[bool, Field(description="true: forget the whole graph (everything remembered there)")]
ConceptName = Annotated[str, Field(min_length=1, description="a word or name as said (normalised like a query)")]
Top = Annotated[int, Field(ge=0, le=100, description="how many of the most mentioned concepts to list")]


# Results: pydantic models, so clients get structured content and an output schema.


class Remembered(BaseModel):
    turn_id: str = Field(description="id of the new turn; give it to `forget` to remove exactly this memory")
    graph: str
    applied: bool = Field(description="true: already recallable; false (wait=false): published, recallable within moments")


class Passage(BaseModel):
    turn_id: str
    speaker: str
    timestamp: datetime = Field(description="when it was said (ISO 8601)")
    text: str = Field(description="the turn as it was said")
    score: float = Field(description="activation that found it; higher is more relevant")


class ConceptActivation(BaseModel):
    concept: str
    activation: float


class Recalled(BaseModel):
    graph: str
    passages: list[Passage] = Field(description="best first; empty if no concept of the query is in the memory")
    concepts: list[ConceptActivation] = Field(description="the concepts whose activation found the passages, strongest first")
    empty: EmptyReason | None = Field(
        default=None, description="why `passages` is empty: no_seeds = no word of the query is in the memory "
        "(rephrase with other words, see `unmatched`); no_passages = what it found leads to no passage held")
    unmatched: list[str] = Field(default_factory=list, description="query words the memory holds no concept for")
    note: str | None = Field(default=None, description="when `passages` is empty: why, in one sentence")


class Forgotten(BaseModel):
    graph: str
    whole_graph: bool
    forgotten: list[str] = Field(description="turn ids the memory held and no longer does")
    not_held: list[str] = Field(description="turn ids asked for that the memory did not hold (nothing to forget)")
    turns_forgotten: int
    turns_left: int
    log_offset: int = Field(description="where the forget request sits in the graph-events log")


class HistoryStep(BaseModel):
    offset: int = Field(description="offset of the event in the graph-events log")
    kind: str = Field(description="created | mentioned | retrieved | decayed | kept | pruned | topic | forgotten | restored")
    at: datetime = Field(description="event time (ISO 8601)")
    activation: float | None = Field(description="the concept's base activation after the event (null: not held)")
    detail: str = Field(description="why, in words (which turn, which decay, ...)")


class Explained(BaseModel):
    graph: str
    concept: str
    steps: list[HistoryStep] = Field(description="oldest first; empty: the graph never held this concept")


# `StatsReply` and its `TopConcept` under the names an agent reads (no class
# docstring: it would become the output schema's description).
class TopConcept(BaseModel):
    concept: str
    mentions: int
    activation: float = Field(description="base activation: how alive the concept is now")

    @classmethod
    def of(cls, top: events.TopConcept) -> "TopConcept":
        return cls(concept=top.text, mentions=top.count, activation=top.base_activation)


class GraphStats(BaseModel):
    graph: str
    version: int
    turns: int
    concepts: int
    edges: int
    passages: int
    topics: int
    top_concepts: list[TopConcept] = Field(description="most mentioned first")

    @classmethod
    def of(cls, graph: str, reply: StatsReply) -> "GraphStats":
        """The reply's version and sizes as they are (taken by name, so none is left behind), its top concepts renamed."""
        sizes = reply.model_dump(include=set(cls.model_fields) - {"graph", "top_concepts"})
        return cls(graph=graph, top_concepts=[TopConcept.of(c) for c in reply.top_concepts], **sizes)


def served(graph: str | None, allow: Iterable[str]) -> Access:
    """What the server serves; ConfigError if that is nothing."""
    access = Access(graph, tuple(allow))
    if access.default is None and not access.allow:
        raise ConfigError("give --graph G (the graph served) and/or --allow PATTERN (graphs a call may name)")
    return access


def build_server(settings: Settings, graph: str | None = None, allow: Iterable[str] = ()) -> "_MemoryServer":
    """The MCP server: its tools, and a lifespan holding one memory client."""
    access = served(graph, allow)
    memory = AsyncMemory(settings=settings)  # resolves the broker now: a missing one fails before serving

    @asynccontextmanager
    async def lifespan(_: MCPServer) -> AsyncIterator[AsyncMemory]:
        try:
            await memory.__aenter__()
        except StreamsError as exc:  # no broker: `serve` reports it in one line
            server.startup_error = exc
            raise
        try:
            yield memory
        finally:
            await memory.__aexit__(None, None, None)

    server = _MemoryServer("emgas", instructions=INSTRUCTIONS, lifespan=lifespan, log_level="WARNING")
    _add_tools(server, memory, access)
    return server


class _MemoryServer(MCPServer):
    """MCPServer whose failed calls read `code: message`, not `Error executing tool ...`."""

    startup_error: StreamsError | None = None  # why the lifespan could not open the memory

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Context | None = None) -> Any:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            return CallToolResult(content=[TextContent(type="text", text=error_text(name, exc))], is_error=True)


def error_text(tool: str, exc: ToolError) -> str:
    """`code: message` for a failed call: the model acts on the code, so every
    failure gets one, and nothing internal (a traceback) reaches it."""
    cause = exc.__cause__
    if isinstance(cause, Refusal):
        log.info("%s refused: %s", tool, cause)
        return str(cause)
    if isinstance(cause, ValidationError):  # the arguments, or what they became (a graph id, a turn)
        return "invalid_arguments: " + "; ".join(_validation_errors(cause))
    if cause is None:  # the SDK's own: an unknown tool
        return f"unknown_tool: {exc}" if str(exc).startswith("Unknown tool") else f"invalid_request: {exc}"
    code = _code_of(cause)
    if code is None:
        log.error("%s failed", tool, exc_info=cause)
        return f"internal_error: {type(cause).__name__} in {tool} (see the server's log)"
    log.info("%s failed: %s", tool, cause)
    message = cause.message if isinstance(cause, MemoryApiError) else str(cause)
    return f"{code}: {message}"


def _code_of(error: BaseException) -> str | None:
    """The reason code of an expected failure, None for a bug."""
    if isinstance(error, MemoryApiError):
        return error.code
    for kind, code in (
        (QueryTimeout, "timeout"), (BrokerError, "broker_unavailable"), (LogUnavailable, "broker_unavailable"),
        (ConfigError, "config_error"), (RequestError, "invalid_arguments"),
        (StreamsError, "memory_error"), (ReplayError, "memory_error"), (CoreError, "memory_error"),
        (StateError, "memory_error"),
    ):
        if isinstance(error, kind):
            return code
    return None


def _validation_errors(error: ValidationError) -> list[str]:
    return [f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}" for e in error.errors()[:3]]


def _add_tools(server: MCPServer, memory: AsyncMemory, access: Access) -> None:
    """The five tools. Their descriptions and parameter descriptions are what
    the model reads to decide when and how to call them: keep them precise."""
    Graph = Annotated[str | None, Field(description=access.describe())]

    @_tool(server, title="Remember", destructive_hint=False, idempotent_hint=False)
    async def remember(
        text: Said, speaker: Speaker = "user", graph: Graph = None, session: Session = None,
        timestamp: SaidAt = None, wait: Wait = True,
    ) -> Remembered:
        """Store one conversation turn in long-term memory. Use it for anything worth recalling
        in a later conversation: facts about the user, preferences, plans, events, decisions.
        One call per turn; the text is kept as said (no summarising needed). Returns the turn id
        (keep it to `forget` the turn later) and whether it is already recallable."""
        gid = access.resolve(graph)
        [turn_id] = await memory.add(text, graph=gid, speaker=speaker, session=session, timestamp=timestamp, wait=wait)
        return Remembered(turn_id=turn_id, graph=gid, applied=wait)

    @_tool(server, title="Recall", read_only_hint=False, destructive_hint=False)
    async def recall(
        query: Query, graph: Graph = None, k: HowMany = 5,
    ) -> Recalled:
        """Search long-term memory: the passages (earlier turns) most associated with the query's
        concepts, by spreading activation through the concept graph, best first, each with
        turn_id, speaker, timestamp, text and score; and the concepts that led to them. Use it
        before answering anything that may depend on earlier conversations. A recall reinforces
        what it finds, as remembering does. An empty result says why (`empty`, `unmatched`): on
        `no_seeds`, ask again in other words. Error `graph_not_found`: nothing remembered there yet."""
        gid = access.resolve(graph)
        found = await memory.search(query, k, graph=gid)
        return Recalled(
            graph=gid,
            passages=[Passage(turn_id=h.turn_id, speaker=h.speaker, timestamp=h.timestamp, text=h.text,
                              score=h.score or 0.0) for h in found.hits],
            concepts=[ConceptActivation(concept=c, activation=a) for c, a in found.concepts[:CONCEPTS_SHOWN]],
            empty=found.empty, unmatched=found.unmatched, note=empty_note(found.empty, found.unmatched),
        )

    @_tool(server, title="Forget", destructive_hint=True, idempotent_hint=True)
    async def forget(
        turn_ids: TurnIds = None, all: WholeGraph = False, graph: Graph = None,
    ) -> Forgotten:
        """Remove turns from long-term memory exactly: the memory becomes one that never saw them
        (their concepts and associations go too, unless other turns hold them). Give either
        `turn_ids` or `all=true`, not both. Use it when the user asks to forget something or a
        memory is wrong. Returns which turns were forgotten, which were not held, and how many
        turns are left. Cannot be undone."""
        gid = access.resolve(graph)
        ids = _forget_scope(turn_ids, all)
        before = await memory.stats(graph=gid, top=0)  # graph_not_found: nothing to forget
        held = [] if all else await _held(memory, gid, ids)
        offset = await (memory.delete_all(graph=gid) if all else memory.delete(ids, graph=gid))
        left = await _turns_left(memory, gid)
        return Forgotten(graph=gid, whole_graph=all, forgotten=held, not_held=[i for i in ids if i not in held],
                         turns_forgotten=before.turns - left, turns_left=left, log_offset=offset)

    @_tool(server, title="Explain a concept", read_only_hint=True)
    async def explain(
        concept: ConceptName, graph: Graph = None,
    ) -> Explained:
        """The history of one concept in memory, oldest first: when it was created, mentioned,
        reinforced by a recall, decayed, pruned, grouped into a topic or forgotten, with the
        activation after each step and why (which turn). Use it to answer "why do you remember
        / no longer remember X?". Reads the graph's log: slower than recall."""
        gid = access.resolve(graph)
        steps = await memory.history(concept, graph=gid)
        return Explained(graph=gid, concept=concept, steps=[
            HistoryStep(offset=s.offset, kind=s.kind, at=s.at, activation=s.activation, detail=s.detail) for s in steps
        ])

    @_tool(server, title="Memory statistics", read_only_hint=True)
    async def stats(
        graph: Graph = None, top: Top = 10,
    ) -> GraphStats:
        """The size of a memory graph (turns, concepts, edges, passages, topics) and its most
        mentioned concepts: what the memory is mostly about. Error `graph_not_found`: nothing
        remembered there yet."""
        gid = access.resolve(graph)
        return GraphStats.of(gid, await memory.stats(graph=gid, top=top))


def _tool(server: MCPServer, **hints: Any) -> Callable[[F], F]:
    """Register a tool; its description is its docstring without the indentation."""

    def register(fn: F) -> F:
        server.add_tool(fn, description=inspect.cleandoc(fn.__doc__ or ""), annotations=ToolAnnotations(**hints))
        return fn

    return register


def _forget_scope(turn_ids: list[str] | None, whole: bool) -> list[str]:
    """The distinct turn ids to forget ([] for the whole graph): exactly one of the two."""
    if whole and turn_ids:
        raise Refusal("invalid_arguments", "give turn_ids or all=true, not both")
    if not whole and not turn_ids:
        raise Refusal("invalid_arguments", "give the turn_ids to forget, or all=true for the whole graph")
    return list(dict.fromkeys(turn_ids or ()))


async def _held(memory: AsyncMemory, graph: str, turn_ids: list[str]) -> list[str]:
    """The ids the graph holds now, so the reply can say what was really forgotten."""
    held = {hit.turn_id for hit in await memory.passages(turn_ids, graph=graph)}
    return [t for t in turn_ids if t in held]


async def _turns_left(memory: AsyncMemory, graph: str) -> int:
    """Turns the graph holds after a forget (0 once the whole graph is gone)."""
    try:
        return (await memory.stats(graph=graph, top=0)).turns
    except MemoryApiError as err:
        if err.code == "graph_not_found":
            return 0
        raise


def serve(settings: Settings, graph: str | None, allow: Iterable[str] = (), http: bool = False,
          host: str = "127.0.0.1", port: int = DEFAULT_PORT) -> int:
    """Run the server until its client leaves (stdio) or it is stopped (HTTP: SIGINT/SIGTERM).

    In stdio mode stdout carries the protocol only: what this says goes to stderr.
    """
    served(graph, allow)
    if http:  # refused before any wait
        check_exposure(host, settings.web_token(), "emgas mcp --http")
    # Started beside a starting `emgas broker`, it waits for it (one line on stderr, EMGAS_BROKER_WAIT_S).
    settings = wait_for_broker(settings)
    server = build_server(settings, graph, allow)
    policy = "graphs served: " + Access(graph, tuple(allow)).served()
    try:
        if not http:
            print(f"emgas mcp: stdio; {policy}; broker {settings.bootstrap_servers()}", file=sys.stderr, flush=True)
            server.run("stdio")
            return 0
        token = settings.web_token()
        check_exposure(host, token, "emgas mcp --http")
        url = f"http://{f'[{host}]' if ':' in host else host}:{port}/mcp"
        auth = "bearer token required" if token else "no token (loopback only)"
        print(f"emgas mcp: streamable HTTP at {url}; {auth}; {policy}; broker {settings.bootstrap_servers()}",
              file=sys.stderr, flush=True)
        # uvicorn stops cleanly on SIGTERM, then raises it again: exit 0 then, not killed by it
        signal.signal(signal.SIGTERM, _exit_cleanly)
        anyio.run(_serve_http, server, host, port, token)
        return 0
    except SystemExit as stop:  # uvicorn's exit: the lifespan failed, or the port is taken
        if server.startup_error is not None:
            raise server.startup_error from None
        if stop.code:
            raise StreamsError(f"cannot serve HTTP on {host}:{port} (see above)") from None
        raise
    except BaseExceptionGroup as group:  # anyio's task groups wrap what the lifespan raised
        raise _first_expected(group) from None


def _exit_cleanly(signum: int, frame: object) -> None:
    raise SystemExit(0)


async def _serve_http(server: _MemoryServer, host: str, port: int, token: str | None = None) -> None:
    """`MCPServer.run_streamable_http_async`, but a memory that cannot open is one line, not a traceback."""
    import uvicorn

    app = server.streamable_http_app(host=host)

    async def quiet_startup(scope: Any, receive: Any, send: Any) -> None:
        async def send_quietly(message: Any) -> None:
            if message["type"] == "lifespan.startup.failed" and server.startup_error is not None:
                message = {**message, "message": ""}  # starlette's traceback; `serve` says why
            await send(message)

        await app(scope, receive, send_quietly if scope["type"] == "lifespan" else send)

    guarded = asgi_guard(quiet_startup, token)
    await uvicorn.Server(uvicorn.Config(guarded, host=host, port=port, log_level="warning")).serve()


def _first_expected(group: BaseExceptionGroup) -> BaseException:
    """The memory's own error in a group (so the CLI prints its one line), else the group."""
    for error in group.exceptions:
        if isinstance(error, BaseExceptionGroup):
            error = _first_expected(error)
        if isinstance(error, (StreamsError, KeyboardInterrupt)):
            return error
    return group
