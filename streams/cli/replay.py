"""The `emgas replay` and `emgas switch` commands: progress, figures, exit codes."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
from datetime import datetime, timezone
from typing import Any, Callable, Coroutine, TypeVar

from tqdm import tqdm

from emgas.replay.digests import format_digests
from emgas.replay.errors import ReplayError
from emgas.replay.fold import Selection
from emgas.replay.run import ReplayResult
from emgas.streams.interfaces.admin import Derivation, derive_from_turns, live_digests, replay, switch_version
from emgas.streams.settings import Settings

T = TypeVar("T")


def run_replay(settings: Settings, args: argparse.Namespace) -> int:
    """0: rebuilt (and equal to the live graphs with --verify); 1: they differ."""
    if args.from_turns:
        if (args.verify or args.as_of or args.to_offset is not None or args.state_dir or args.from_beginning
                or args.processes is not None):
            raise ReplayError("--from-turns appends a new graph version to the log; it takes no other option")
        return _report_derivation(_with_bar("extract", lambda bar: derive_from_turns(settings, args.graph, progress=bar.update)))
    if args.verify and (args.as_of or args.to_offset is not None):
        raise ReplayError("--verify compares with the live graphs as they are now: drop --as-of/--to-offset")
    if args.to_offset is not None and not args.graph:
        raise ReplayError("--to-offset is an offset of one graph's partition: give --graph")
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S.%fZ")
    state_dir = args.state_dir or settings.home / "replay" / f"{stamp}-{args.graph or 'all'}"
    selection = Selection(graph_id=args.graph, as_of=args.as_of, to_offset=args.to_offset)
    quiet_rejections(args.verbose)

    def start(bar: tqdm) -> Coroutine[Any, Any, ReplayResult]:
        return replay(
            settings, state_dir, args.graph, selection, args.verify,
            progress=bar.update, on_plan=lambda n: bar.reset(total=n), from_beginning=args.from_beginning,
            processes=args.processes,
        )

    result = _with_bar("replay", start)
    _print_replay(result, args.json)
    return 1 if result.differences else 0


def quiet_rejections(verbose: bool) -> None:
    """The fold's own log of a rejection stays out of the replay's output
    (which prints one line per rejected event); with --verbose it shows,
    with the traceback."""
    logger = logging.getLogger("emgas.state.projector")
    if verbose:
        logger.setLevel(logging.DEBUG)
        if not logging.getLogger().handlers:
            logging.basicConfig(format="%(levelname)s %(name)s: %(message)s")
    else:
        logger.setLevel(logging.CRITICAL)


def _with_bar(desc: str, start: Callable[[tqdm], Coroutine[Any, Any, T]]) -> T:
    """Run `start(bar)` with a progress bar on stderr."""
    with tqdm(unit="event", desc=desc) as bar:
        return asyncio.run(start(bar))


def _print_replay(result: ReplayResult, as_json: bool) -> None:
    counts, report = result.report.counts, result.report
    if as_json:
        print(json.dumps({
            "state_dir": str(result.state_dir),
            "events_read": counts.read, "outcomes": counts.outcomes,
            "not_selected": counts.not_selected, "undecodable": counts.undecodable,
            "rejections": [vars(r) for r in counts.rejections],
            "seconds": round(report.seconds, 3), "events_per_s": round(report.events_per_s, 1),
            "processes": report.processes,
            "ranges": {str(p): list(r) for p, r in report.ranges.items()},
            "checkpoints": {str(p): o for p, o in report.checkpoints.items()},
            "digests": [d.model_dump() for d in result.digests],
            "differences": result.differences,
        }, indent=2))
        return
    print(format_digests(result.digests))
    print(
        f"replayed {counts.read} events ({counts.applied} applied) from "
        f"{len(report.ranges)} partition(s) in {report.seconds:.2f} s"
        f"{f' ({report.processes} processes side by side)' if report.processes > 1 else ''}: "
        f"{report.events_per_s:,.0f} events/s, into {result.state_dir}"
    )
    for partition, offset in sorted(report.checkpoints.items()):
        start, stop = report.ranges[partition]
        print(f"partition {partition}: started from the checkpoint at offset {offset}, folded offsets {start}..{stop - 1}")
    for rejection in counts.rejections:
        print(rejection)
    rejected = counts.outcomes.get("rejected", 0)
    if rejected:
        print(f"{rejected} event(s) rejected by the fold, as the live worker rejected them (see its log)")
    if result.differences is None:
        return
    if result.differences:
        print("DIFFERENT from the live graphs:")
        for line in result.differences:
            print(f"  {line}")
    else:
        print(f"verified: all {len(result.digests)} graph version(s) equal the live ones")


def _report_derivation(result: Derivation) -> int:
    for graph, version in sorted(result.versions.items()):
        print(
            f"graph {graph!r}: version {version} derived from {result.turns[graph]} turns and appended "
            f"to the log; switch to it with `emgas switch --graph {graph} --version {version}`"
        )
    if result.undecodable:
        print(f"{result.undecodable} undecodable turn(s) skipped (they are in the dead-letter topic)")
    for graph, (found, live) in sorted(result.short.items()):
        print(f"warning: graph {graph!r}: the turns topic holds {found} of the {live} turns its live graph was built "
              f"from (retention dropped the others): version {result.versions[graph]} holds only those {found}; "
              "do not switch to it unless that is what you want", file=sys.stderr)
    return 0


def run_switch(settings: Settings, args: argparse.Namespace) -> int:
    live = asyncio.run(live_digests(settings, args.graph))
    versions = sorted(d.version for r in live for d in r.graphs)
    if args.version not in versions:
        raise ReplayError(f"graph {args.graph!r} has no version {args.version} (it has {versions or 'none'})")
    result = asyncio.run(switch_version(settings, args.graph, args.version, datetime.now(timezone.utc)))
    print(
        f"graph {args.graph!r} now uses version {args.version}; "
        f"{result.turns.get(args.graph, 0)} turns re-derived into it to close the gap"
    )
    return 0


def run_explain(settings: Settings, args: argparse.Namespace) -> int:
    """Print a concept's history; 1 if the graph never held it."""
    from emgas.processors.extract import normalise
    from emgas.replay.explain import explain, format_steps
    from emgas.streams.interfaces.admin import graph_records

    records = asyncio.run(graph_records(settings, args.graph))
    candidates = list(dict.fromkeys([args.concept, args.concept.lower(), normalise(args.concept, "en")]))
    steps = explain(records, args.graph, candidates, settings.graph, args.version)
    if args.json:
        print(json.dumps([{**vars(s), "at": s.at.isoformat()} for s in steps], indent=2))
    elif steps:
        print(format_steps(steps))
    if not steps:
        print(f"graph {args.graph!r} never held a concept {args.concept!r}", file=sys.stderr)
        return 1
    return 0
