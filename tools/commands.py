"""The tool commands of `emgas`: the demo, benchmarks, evaluation, load test, soak and simulation.

This is the registration table the CLI reads (`streams.cli.main` finds
`COMMANDS` here by module name when the tools are present: a checkout of
the repository has them, the installed package does not).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from emgas.streams.cli.command import Command, OneOf, arg, unwind_on_sigterm
from emgas.streams.settings import Settings
from emgas.tools.baselines import NAMES as RETRIEVERS


def _demo(settings: Settings, args: argparse.Namespace) -> int:
    from emgas.tools.demo import run_demo

    figures = run_demo(settings, rounds=args.rounds, kind="kafka" if args.kafka else "mock" if args.mock else None)
    if args.json_out:
        args.json_out.write_text(json.dumps(figures, indent=2))
    return 0


def _bench_replay(settings: Settings, args: argparse.Namespace) -> int:
    from emgas.tools.replay_bench import print_figures, run_replay_bench

    print_figures(run_replay_bench(settings, args.turns), args.json)
    return 0


def _eval(settings: Settings, args: argparse.Namespace) -> int:
    from emgas.tools.evaluation import format_table, run_eval

    if args.misses:
        from emgas.tools.misses import run_misses

        print(run_misses(args.data, settings, args.misses, args.conversation))
        return 0
    figures = run_eval(args.data, settings, args.retriever or (), args.conversation, args.paper_style)
    print(format_table(figures))
    if args.json_out:
        args.json_out.write_text(json.dumps(figures, indent=2))
    return 0


def _bench(settings: Settings, args: argparse.Namespace) -> int:
    from emgas.tools.bench import format_figures, run_bench

    from tqdm import tqdm

    with tqdm(unit="step", desc="bench") as bar:
        def progress(step: str) -> None:
            bar.set_description(step)
            bar.update(1)

        if args.mock:
            settings = settings.model_copy(update={"broker_kind": "mock"})
        partial = (lambda figures: args.json_out.write_text(json.dumps({**figures, "partial": True}, indent=2))) \
            if args.json_out else None
        figures = run_bench(settings, args.quick, progress=progress, partial=partial)
    print(format_figures(figures))
    if args.json_out:
        args.json_out.write_text(json.dumps(figures, indent=2))
    return 0


def _loadtest(settings: Settings, args: argparse.Namespace) -> int:
    """0 when every turn was applied and no reply was an error; 1 otherwise."""
    from emgas.tools.loadtest import run_loadtest

    unwind_on_sigterm()
    figures = run_loadtest(settings, args.turns, args.queries_per_s, args.duration, args.graphs)
    for name, value in figures.items():
        print(f"{name:>24}: {value}")
    if args.json_out:
        args.json_out.write_text(json.dumps(figures, indent=2))
    return 0 if figures["ok"] else 1


def _soak(settings: Settings, args: argparse.Namespace) -> int:
    """0 when the reconciliation found nothing wrong; 1 otherwise (each failure printed)."""
    from emgas.tools.soak import SoakOptions, print_figures, run_soak

    options = SoakOptions(
        duration_s=args.duration, rate=args.rate, queries_per_s=args.queries_per_s, query_users=args.query_users,
        graphs=args.graphs,
        workers=args.workers, fault_every_s=args.fault_every, seed=args.seed, query_timeout_s=args.query_timeout,
        stall_s=(args.stall_min, args.stall_max), every_kind=args.every_kind, worker_loglevel=args.worker_loglevel,
        trace_memory=args.trace_memory,
    )
    unwind_on_sigterm()
    figures = run_soak(settings, options, keep=args.keep)
    print_figures(figures)
    if args.json_out:
        args.json_out.write_text(json.dumps(figures, indent=2))
    return 0 if figures["ok"] else 1


def _simulate(settings: Settings, args: argparse.Namespace) -> int:
    from emgas.tools.simulation import Stream, compare, format_samples

    figures = compare(Stream(days=args.days, turns_per_day=args.turns_per_day), settings.graph, args.every)
    print(format_samples(figures))
    if args.json_out:
        args.json_out.write_text(json.dumps(figures, indent=2))
    return 0


COMMANDS: tuple[Command, ...] = (
    Command("demo", "broker (real Kafka where Java is) + worker, sample conversation, queries", _demo, (
        OneOf((
            arg("--kafka", action="store_true", help="on Apache Kafka (an error without Java or its jars)"),
            arg("--mock", action="store_true", help="on librdkafka's mock cluster"),
        ), required=False),
        arg("--rounds", type=int, default=20, help="query repetitions for latency figures"),
        arg("--json-out", type=Path, help="write the measured figures here as JSON"),
    )),
    Command("bench-replay", "measure live ingest vs replay and recovery on a scratch broker (Kafka where Java is, else the mock)", _bench_replay, (
        arg("--turns", type=int, default=3000, help="turns to ingest (the mock keeps ~5 MiB per partition)"),
        arg("--json", type=Path, help="write the figures here as JSON"),
    )),
    Command("eval", "retrieval quality on a LoCoMo-shaped directory (in-process)", _eval, (
        arg("dataset", choices=["locomo"]),
        arg("--data", type=Path, required=True, help="directory with turns.jsonl and qa.jsonl"),
        arg("--json", type=Path, dest="json_out", help="write the figures to this file"),
        arg("--retriever", action="append", choices=RETRIEVERS,
            help="retrievers to compare (repeatable; default: all; dense ones need emgas[dense])"),
        arg("--paper-style", action="store_true", help="score as the LoCoMo paper's Table 3: all categories, "
            "adversarial included, questions without evidence count as found"),
        arg("--conversation", action="append", default=[], help="only this conversation (repeatable)"),
        arg("--misses", type=Path, help="instead of the figures: why emgas misses evidence at 10, per "
            "question, written to this file as JSON (a summary per category is printed)"),
    )),
    Command("bench", "speed figures: extraction, the fold, ingest, queries, round trips, replay, forgetting, "
            "memory, and the limits they are held to", _bench, (
        arg("--json", type=Path, dest="json_out", help="write the figures to this file"),
        arg("--quick", action="store_true", help="small sizes: under a minute, for smoke tests"),
        arg("--mock", action="store_true", help="live figures on librdkafka's mock cluster (default: Apache Kafka where Java is)"),
    )),
    Command("loadtest", "turns and queries at a steady rate on a scratch broker (Kafka where Java is, else the mock), then reconcile", _loadtest, (
        arg("--turns", type=int, default=2000),
        arg("--queries-per-s", type=float, default=20.0),
        arg("--duration", type=float, default=20.0, help="seconds of load (it stops by itself)"),
        arg("--graphs", type=int, default=50),
        arg("--json", type=Path, dest="json_out", help="write the figures to this file"),
    )),
    Command("soak", "faults under load: three Kafka nodes, a group of workers, turns and queries at steady rates, "
            "workers and brokers killed, stalled and restarted, bad records; then a reconciliation that can fail", _soak, (
        arg("--duration", type=float, default=300.0, help="seconds of load and faults (it stops by itself)"),
        arg("--rate", type=float, default=100.0, help="turns offered a second"),
        arg("--queries-per-s", type=float, default=4.0, help="queries a second, while they are answered quickly"),
        arg("--query-users", type=int, default=4, help="concurrent askers, one query at a time each (retried until answered)"),
        arg("--graphs", type=int, default=50),
        arg("--workers", type=int, default=2, choices=[2, 3]),
        arg("--fault-every", type=float, default=30.0, help="seconds between the starts of two faults (at the least)"),
        arg("--seed", type=int, default=1, help="draws the faults' order, targets and stalls, and the turns"),
        arg("--query-timeout", type=float, default=5.0, help="seconds a query attempt waits for its reply"),
        arg("--stall-min", type=float, default=10.0, help="a SIGSTOPped broker's shortest stall, seconds"),
        arg("--stall-max", type=float, default=20.0, help="its longest"),
        arg("--every-kind", action="store_true", help="go on past --duration until every kind of fault was done once"),
        arg("--keep", type=Path, help="keep the cluster's logs and the workers' output in this new directory"),
        arg("--worker-loglevel", default="WARNING", help="the workers' log level (their output is kept with --keep)"),
        arg("--trace-memory", type=Path, help="run the workers under tracemalloc (slower), each writing its heap's "
            "growth every 20 s to DIR/<pid>.txt (`emgas.tools.memtrace`)"),
        arg("--json", type=Path, dest="json_out", help="write the figures to this file"),
    )),
    Command("simulate", "graph size under a drifting synthetic stream, with and without forgetting", _simulate, (
        arg("--days", type=int, default=1080),
        arg("--turns-per-day", type=int, default=8),
        arg("--every", type=int, default=90, help="sample the size every this many days"),
        arg("--json", type=Path, dest="json_out", help="write the samples to this file"),
    )),
)
