"""The `emgas` command line: an associative memory on Kafka (run `emgas COMMAND --help`).

The only entry point: it builds the settings once and hands them down.
Expected failures (no broker, bad input or configuration, timeouts) print
one clear line on stderr and exit 2; `--verbose` adds the traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import importlib
import json
import signal
import sys
import threading
import traceback
from datetime import datetime, timezone
from pathlib import Path
from typing import Annotated, Any, Sequence, get_args, get_origin

from pydantic import ValidationError

from emgas.processors.codec import decode_turn
from emgas.processors.errors import CoreError, DecodeError
from emgas.processors.events import (
    ActivationReply, ErrorReply, QueryParams, RankedConcept, Reply, StatsReply, Turn,
)
from emgas.replay.errors import ReplayError
from emgas.state.errors import StateError
from emgas.service.wordnet import use_directory
from emgas.streams.interfaces.client import MemoryClient, forget_request
from emgas.streams.interfaces.memory import empty_note
from emgas.streams.cli.command import Arg, Command, OneOf, arg, unwind_on_sigterm
from emgas.streams.errors import InputFileError, QueryTimeout, StreamsError
from emgas.streams.c_heap import keep_freed_memory
from emgas.streams.settings import Settings


# The fold allocates many short-lived objects (events, records, tuples) that
# reference counting frees; CPython's default thresholds (a young collection
# every 700 allocations) spent 10-15 % of a fold in the cyclic collector
# looking for cycles that are not there.
GC_THRESHOLDS = (50_000, 20, 100)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    _collect_less()
    keep_freed_memory()
    try:
        settings = Settings()
        use_directory(settings.wordnet_dir)
        return args.func(settings, args) or 0
    except (StreamsError, CoreError, ReplayError, StateError) as exc:
        return _fail(str(exc), args.verbose)
    except ValidationError as exc:
        where = ", ".join(".".join(str(p) for p in e["loc"]) or "(settings)" for e in exc.errors()[:3])
        return _fail(f"invalid configuration ({where}): {exc.errors()[0]['msg']}", args.verbose)
    except KeyboardInterrupt:
        return 130


def _collect_less() -> None:
    """The objects the imports made are never traversed again (`gc.freeze`),
    and the collector runs at `GC_THRESHOLDS` (on again: `emgas.__main__`
    turns it off while the command line's modules load)."""
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)
    gc.enable()


def _fail(message: str, verbose: bool) -> int:
    """One line on stderr (and the traceback with --verbose); exit status 2."""
    if verbose:
        traceback.print_exc()
    print(f"emgas: error: {message}", file=sys.stderr)
    return 2


def _parser() -> argparse.ArgumentParser:
    """The parser of every command in `COMMANDS` (defined after the commands' functions) and the tools'."""
    parser = argparse.ArgumentParser(prog="emgas", description=__doc__.splitlines()[0], epilog=_tools_note())
    parser.add_argument("-v", "--verbose", action="store_true", help="on errors, also print the traceback")
    sub = parser.add_subparsers(required=True, metavar="COMMAND")
    for command in COMMANDS + tool_commands():
        command_parser = sub.add_parser(command.name, help=command.help)
        for argument in command.args:
            argument.add_to(command_parser)
        command_parser.set_defaults(func=command.run)
    return parser


def tool_commands() -> tuple[Command, ...]:
    """The tools' commands (demo, benchmarks, evaluation), found by module name in
    `TOOL_REGISTRY`: a checkout of the repository has them, the installed package not."""
    try:
        registry = importlib.import_module(TOOL_REGISTRY)
    except ModuleNotFoundError as exc:
        if exc.name is None or not TOOL_REGISTRY.startswith(exc.name):
            raise
        return ()
    return registry.COMMANDS


def _tools_note() -> str | None:
    if tool_commands():
        return None
    return ("The tool commands (demo, bench, bench-replay, eval, loadtest, simulate) come with a checkout "
            "of the repository (make demo), not with the installed package.")


GRAPH_CHOICE = OneOf((arg("--graph", help="one graph_id"), arg("--all", action="store_true", help="every graph")))
JSON_FLAG = arg("--json", action="store_true")


def _query_param_args() -> tuple[Arg, ...]:
    """One option per spreading-activation parameter (`QueryParams`), e.g. `--propagation-decay`."""
    return tuple(arg(f"--{name.replace('_', '-')}", dest=name, type=_number_type(name)) for name in QueryParams.model_fields)


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1: {value}")
    return value


def _aware_datetime(text: str) -> datetime:
    """An ISO 8601 time with its offset, or Unix seconds (as a turn's `timestamp` may be)."""
    try:
        return datetime.fromtimestamp(float(text), timezone.utc)
    except (ValueError, OverflowError, OSError):
        pass
    try:
        value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an ISO 8601 time or Unix seconds: {text!r}") from None
    if value.tzinfo is None:
        raise argparse.ArgumentTypeError(f"{text!r} has no time zone (add Z or +HH:MM)")
    return value


def _number_type(name: str) -> Any:
    """int or float, as `QueryParams` declares the parameter (which checks its range)."""
    (declared,) = (kind for kind in get_args(QueryParams.model_fields[name].annotation) if kind is not type(None))
    return get_args(declared)[0] if get_origin(declared) is Annotated else declared


def _broker(settings: Settings, args: argparse.Namespace) -> int:
    """Run this machine's broker in the foreground until SIGINT/SIGTERM (see `streams.kafka.local`)."""
    from emgas.streams.kafka.node import install
    from emgas.streams.kafka.local import remove_broker_file, start_local_broker, write_broker_file

    if args.install:
        jars = install(settings.kafka_cache)
        print(f"Apache Kafka {jars.version}: {len(list(jars.libs.glob('*.jar')))} jars in {jars.libs}")
        return 0
    kind = "kafka" if args.kafka else "mock" if args.mock else None
    # SIGTERM while Kafka starts: unwind, so that what started (the JVM) is stopped too.
    unwind_on_sigterm()
    broker = start_local_broker(settings, settings.kafka_dir, kind, mock_brokers=args.brokers)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    try:
        if broker.note:
            print(broker.note, flush=True)
        write_broker_file(settings, broker)
        print(f"{broker.description} on {broker.bootstrap_servers}", flush=True)
        print(f"bootstrap servers written to {settings.broker_file}; Ctrl-C to stop", flush=True)
        stop.wait()
    finally:
        remove_broker_file(settings, broker)
        broker.close()
    return 0


def _worker(settings: Settings, args: argparse.Namespace) -> int:
    from emgas.streams.runtime.preflight import start_checks

    broker = start_checks(settings)  # the broker's round trips beside the runtime's imports too
    from emgas.streams.runtime.worker import run_worker

    run_worker(settings, loglevel=args.loglevel.upper(), broker=broker)
    return 0


def read_turns(path: Path) -> list[Turn]:
    """Turns from a JSON-lines file; InputFileError names the first bad line."""
    try:
        lines = sys.stdin.read().splitlines() if str(path) == "-" else path.read_text().splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise InputFileError(f"cannot read {path}: {exc}") from None
    turns = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            turns.append(decode_turn(line.encode()))
        except DecodeError as err:
            raise InputFileError(f"{path}:{number}: {err}") from None
    return turns


def _publish(settings: Settings, args: argparse.Namespace) -> int:
    from tqdm import tqdm

    turns = read_turns(args.file)
    if args.wait:
        from emgas.streams.kafka.discovery import wait_for_broker

        settings = wait_for_broker(settings)

    async def run() -> None:
        async with MemoryClient(settings) as client:
            with tqdm(total=len(turns), unit="turn", desc="publish") as bar:
                await client.publish(turns, progress=bar.update)
            if args.wait:
                await _wait_applied(client, turns, args.wait_s)

    asyncio.run(run())
    applied = " and applied" if args.wait else ""
    print(f"published{applied} {len(turns)} turns to {settings.turns_topic}")
    return 0


async def _wait_applied(client: MemoryClient, turns: list[Turn], wait_s: float) -> None:
    """Until every graph holds its turns (`wait_s` in all at most; MemoryApiError `not_applied` else)."""
    from emgas.streams.interfaces.memory import wait_applied

    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait_s
    by_graph: dict[str, list[str]] = {}
    for turn in turns:
        by_graph.setdefault(turn.graph_id, []).append(turn.turn_id)
    for graph, ids in by_graph.items():
        await wait_applied(client, graph, list(dict.fromkeys(ids)), max(0.0, deadline - loop.time()))


def _query(settings: Settings, args: argparse.Namespace) -> int:
    if not args.text and not args.seed:
        raise InputFileError("give a query text or at least one --seed")
    params = QueryParams(**{n: getattr(args, n) for n in QueryParams.model_fields if getattr(args, n) is not None})

    async def run() -> Reply:
        async with MemoryClient(settings) as client:
            return await client.ask(
                args.graph, args.text, tuple(args.seed), params, args.timeout,
                reinforce=not args.no_reinforce, at=args.at,
            )

    reply = asyncio.run(run())
    if args.json:
        print(reply.model_dump_json())
    else:
        print(format_reply(reply))
    return 1 if isinstance(reply, ErrorReply) else 0


def shown_concepts(reply: ActivationReply) -> list[RankedConcept]:
    """The reply's concepts as a person reads them: by activation, highest
    first (ties by id), without Chinese character bigrams that are no word
    (they still rank passages; `processors.chinese.is_fragment`)."""
    concepts = sorted(reply.concepts, key=lambda c: (-c.activation, c.id))
    if all(c.text.isascii() for c in concepts):
        return concepts
    from emgas.processors import chinese  # jieba, only for text that may be Chinese

    nearby = {w for p in reply.passages for w in chinese.words(p.text)}
    return [c for c in concepts if not chinese.is_fragment(c.text, nearby)]


def format_reply(reply: Reply) -> str:
    """A human-readable rendering of a reply."""
    if isinstance(reply, ErrorReply):
        return f"error {reply.code}: {reply.message}"
    assert isinstance(reply, ActivationReply)
    lines = [
        f"seeds: {', '.join(reply.seeds) or '(none found in the graph)'}"
        f"   [{reply.iterations} iterations, {reply.timings.total_ms:.2f} ms in the worker,"
        f" graph of {reply.stats.concepts} concepts / {reply.stats.turns} turns]",
        "concepts: " + ", ".join(f"{c.text} ({c.activation:.3f})" for c in shown_concepts(reply)),
    ]
    if reply.expanded:
        related = f"related: {', '.join(reply.expanded)}"
        lines.append(f"{related} (for {', '.join(reply.unmatched)})" if reply.unmatched else related)
    for p in reply.passages:
        lines.append(f"  {p.score:6.3f}  [{p.turn_id}] {p.speaker}: {p.text}")
    if reply.empty is not None:
        lines.append(f"no passage ({reply.empty}): {empty_note(reply.empty, reply.unmatched)}")
    return "\n".join(lines)




def _digest(settings: Settings, args: argparse.Namespace) -> int:
    from emgas.replay.digests import digests_of_dir, format_digests
    from emgas.streams.interfaces.admin import live_digests

    if args.state_dir:
        digests = digests_of_dir(args.state_dir, args.graph, settings.graph)
    else:
        digests = [d for r in asyncio.run(live_digests(settings, args.graph)) for d in r.graphs]
    if args.graph and not digests:
        raise InputFileError(f"graph {args.graph!r} has no state" + (f" in {args.state_dir}" if args.state_dir else ""))
    if args.json:
        print(json.dumps([d.model_dump() for d in digests], indent=2))
    else:
        print(format_digests(digests))
    return 0


def _replay(settings: Settings, args: argparse.Namespace) -> int:
    from emgas.streams.cli.replay import run_replay

    return run_replay(settings, args)


def _snapshot(settings: Settings, args: argparse.Namespace) -> int:
    from emgas.streams.interfaces.snapshots import request_snapshots

    result = asyncio.run(request_snapshots(settings, args.graph, args.wait or None))
    for graph, (partition, offset) in sorted(result.markers.items()):
        print(f"graph {graph!r}: snapshot requested at {settings.graph_events_topic}[{partition}] offset {offset}")
    for partition, offset in sorted(result.checkpoints.items()):
        print(f"partition {partition}: checkpoint at offset {offset}")
    if not result.markers:
        print("no live graph to snapshot")
    return 0












def _config(settings: Settings, args: argparse.Namespace) -> int:
    # SecretStr fields dump as "**********" in JSON mode.
    print(json.dumps(settings.model_dump(mode="json"), indent=2))
    return 0


def _stats(settings: Settings, args: argparse.Namespace) -> int:
    async def run() -> Reply:
        async with MemoryClient(settings) as client:
            return await client.stats(args.graph, args.top)

    reply = asyncio.run(run())
    if isinstance(reply, ErrorReply):
        print(f"error {reply.code}: {reply.message}", file=sys.stderr)
        return 1
    assert isinstance(reply, StatsReply), type(reply).__name__
    if args.json:
        print(reply.model_dump_json())
        return 0
    print(f"graph {reply.graph_id} v{reply.version}: {reply.turns} turns, {reply.concepts} concepts, "
          f"{reply.edges} edges, {reply.passages} passages, {reply.topics} topics")
    for c in reply.top_concepts:
        print(f"  {c.count:6d}  {c.text}  (activation {c.base_activation:.3f})")
    return 0


def _forget(settings: Settings, args: argparse.Namespace) -> int:
    event = forget_request(args.graph, args.turn, args.all)

    async def run() -> tuple[int, Reply]:
        async with MemoryClient(settings) as client:
            deadline = asyncio.get_running_loop().time() + args.wait_s
            offset = await client.forget(event, args.wait_s)
            while True:  # the size after it: asked again while a hand-over leaves it unanswered
                try:
                    return offset, await client.stats(args.graph, top=0)
                except QueryTimeout:
                    if asyncio.get_running_loop().time() > deadline:
                        raise

    offset, after = asyncio.run(run())
    what = "the whole graph" if event.whole_graph else "turn(s) " + ", ".join(event.turn_ids)
    remaining = after if isinstance(after, StatsReply) else None
    if args.json:
        print(json.dumps({
            "graph_id": event.graph_id, "request_id": event.request_id, "offset": offset,
            "turn_ids": list(event.turn_ids), "whole_graph": event.whole_graph,
            "after": remaining.model_dump(mode="json") if remaining else None,
        }))
        return 0
    print(f"graph {event.graph_id!r}: forgot {what} (request {event.request_id}, log offset {offset})")
    if remaining is None:
        print("the graph holds nothing now")
    else:
        print(f"now {remaining.turns} turns, {remaining.concepts} concepts, {remaining.edges} edges, "
              f"{remaining.passages} passages")
    return 0


def _explain(settings: Settings, args: argparse.Namespace) -> int:
    from emgas.streams.cli.replay import run_explain

    return run_explain(settings, args)


def _switch(settings: Settings, args: argparse.Namespace) -> int:
    from emgas.streams.cli.replay import run_switch

    return run_switch(settings, args)


def _mcp(settings: Settings, args: argparse.Namespace) -> int:
    """Imported here: the MCP SDK is an extra (`emgas[mcp]`), the rest works without it."""
    try:
        from emgas.streams.interfaces.mcp_server import serve
    except ImportError as exc:
        if not (exc.name or "").startswith("mcp"):
            raise
        raise StreamsError("`emgas mcp` needs the MCP SDK (mcp>=2): pip install -e '.[mcp]' in a clone of emgas") from None
    return serve(settings, args.graph, args.allow, http=args.http, host=args.host, port=args.port)


# The one place the product names its tools: the module holding their commands.
TOOL_REGISTRY = "emgas.tools.commands"

COMMANDS: tuple[Command, ...] = (
    Command("broker", "run this machine's broker in the foreground (real Kafka where Java is, else the mock)", _broker, (
        OneOf((
            arg("--kafka", action="store_true", help="Apache Kafka (one KRaft node; an error without Java or its jars)"),
            arg("--mock", action="store_true", help="librdkafka's mock cluster (keeps ~5 MiB per partition, nothing after a stop)"),
            arg("--install", action="store_true", help="fetch the pinned Kafka's jars from Maven Central (needs mvn), then exit"),
        ), required=False),
        arg("--brokers", type=int, default=1, help="brokers in the mock cluster"),
    )),
    Command("worker", "run a worker against the configured broker", _worker, (arg("--loglevel", default="INFO"),)),
    Command("publish", "publish turns from a JSON-lines file", _publish, (
        arg("file", type=Path, help="one Turn JSON object per line ('-' = stdin)"),
        arg("--wait", action="store_true",
            help="wait for a broker still starting (EMGAS_BROKER_WAIT_S), then until the workers have applied "
                 "every turn (--wait-s); exit 2 if they have not"),
        arg("--wait-s", type=float, default=60.0, metavar="SECONDS",
            help="with --wait: how long the workers may take to apply the turns (default 60)"),
    )),
    Command("query", "ask an activation query and print the reply", _query, (
        arg("--graph", required=True, help="graph_id to query"),
        arg("text", nargs="?", help="query text (concepts are extracted from it)"),
        arg("--seed", action="append", default=[], help="explicit seed concept (repeatable)"),
        arg("--json", action="store_true", help="print the raw reply JSON"),
        arg("--timeout", type=float, help="seconds to wait for the reply"),
        *_query_param_args(),
        arg("--no-reinforce", action="store_true", help="do not boost the concepts the answer activates"),
        arg("--at", type=_aware_datetime, help="event time of the reinforcement (default: the graph's latest)"),
    )),
    Command("digest", "print the canonical digest of live graphs (or of a state directory)", _digest, (
        GRAPH_CHOICE,
        arg("--state-dir", type=Path, help="digest this rebuilt state directory instead of the live graphs"),
        arg("--json", action="store_true", help="print the digests as JSON"),
    )),
    Command("replay", "rebuild graphs from the log into a fresh state directory", _replay, (
        GRAPH_CHOICE,
        arg("--state-dir", type=Path, help="where to build (default: a new directory under EMGAS_HOME/replay)"),
        arg("--verify", action="store_true", help="compare with the live graphs; exit 1 on any difference"),
        arg("--as-of", type=_aware_datetime, help="only events with event time <= this time (ISO 8601 with an offset, or Unix seconds)"),
        arg("--to-offset", type=int, help="only events at or before this offset of the graph's partition"),
        arg("--from-turns", action="store_true",
            help="re-extract the turns topic into a new graph version (switch to it with `emgas switch`)"),
        arg("--from-beginning", action="store_true",
            help="fold every record from the log's first, not from the latest checkpoint (same digests, slower)"),
        arg("--processes", type=_positive_int, default=None,
            help="fold the partitions side by side in this many processes (default: one per core, per partition "
                 "with records to read and per 15,000 records; 1: all in this process)"),
        arg("--json", action="store_true", help="print the result as JSON"),
    )),
    Command("snapshot", "write snapshots of graphs to the log now (recovery starts from them)", _snapshot, (
        GRAPH_CHOICE,
        arg("--wait", type=float, default=30.0, help="seconds to wait for the checkpoints (0: do not wait)"),
    )),
    Command("config", "print the effective configuration (secrets masked)", _config),
    Command("stats", "a graph's size and its most mentioned concepts", _stats, (
        arg("--graph", required=True),
        arg("--top", type=int, default=10, help="how many concepts to list"),
        JSON_FLAG,
    )),
    Command("explain", "when a concept was created, reinforced, decayed and pruned, and why", _explain, (
        arg("--graph", required=True),
        arg("concept", help="concept id or surface form (normalised like a query)"),
        arg("--version", type=int, default=None, help="graph version (default: every version)"),
        JSON_FLAG,
    )),
    Command("forget", "forget turns of a graph, or a whole graph, live and in every replay", _forget, (
        arg("--graph", required=True),
        OneOf((
            arg("--turn", action="append", default=[], help="turn_id to forget (repeatable)"),
            arg("--all", action="store_true", help="the whole graph"),
        )),
        arg("--wait-s", type=float, default=60.0, metavar="SECONDS",
            help="how long the worker may take to apply the forget, a hand-over included (default 60); "
                 "exit 2 if it has not (the request stays in the log and is applied when a worker runs)"),
        JSON_FLAG,
    )),
    Command("switch", "make a graph version the one queries and new turns use", _switch, (
        arg("--graph", required=True),
        arg("--version", type=int, required=True),
    )),
    Command("mcp", "serve the memory to agents over the Model Context Protocol (stdio, or --http)", _mcp, (
        arg("--graph", help="the graph served to calls that name none"),
        arg("--allow", action="append", default=[], metavar="PATTERN",
            help="other graphs a call may name (fnmatch glob, repeatable; default: none but --graph)"),
        arg("--http", action="store_true", help="streamable HTTP at http://HOST:PORT/mcp instead of stdio"),
        arg("--host", default="127.0.0.1", help="HTTP address to bind (default: 127.0.0.1)"),
        arg("--port", type=int, default=8765, help="HTTP port (default: 8765)"),
    )),
)


if __name__ == "__main__":
    sys.exit(main())
