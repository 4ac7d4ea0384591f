"""Running the whole bench: every part in order, the limits, the printed report."""

from __future__ import annotations

import os
import platform
from importlib.metadata import version
from typing import Any, Callable


from emgas.streams.settings import Settings
from emgas.tools.scaling_bench import SCALE_GRAPHS, scaling_figures
from emgas.tools.synthetic import Shape, conversations
from emgas.tools.bench.core import extraction_figures, fold_figures, language_figures, query_figures
from emgas.tools.bench.forgetting import forget_figures
from emgas.tools.bench.limits import limits
from emgas.tools.bench.sealing import sealing_figures
from emgas.tools.bench.live import broker_in_use, pipeline_figures
from emgas.tools.bench.takeover import history_log, in_process_recovery_figures, takeover_figures
from emgas.tools.figures import Progress


def machine() -> dict[str, Any]:
    return {
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "versions": {p: version(p) for p in ("numpy", "yake", "rocksdict", "aiokafka", "faust-streaming", "confluent-kafka")},
    }


def run_bench(
    settings: Settings, quick: bool, progress: Progress = print, partial: Callable[[dict[str, Any]], None] | None = None
) -> dict[str, Any]:
    """Every figure; `partial(figures so far)` after each part (a long run that fails late keeps the rest)."""
    size = (
        dict(extract=100, fold_turns=1500, language_turns=200, concepts=10_000, edges=200_000, queries=50, ingest=200, rr_turns=300, rr_queries=50,
             hops=50, idle_s=3.0, forget_days=60, takeover_turns=100, recovery_turns=300, repeats=2,
             scale_turns=150, handoff_turns=600, scale_repeats=1)
        if quick
        else dict(extract=1000, fold_turns=8000, language_turns=3000, concepts=100_000, edges=2_000_000, queries=300, ingest=2000, rr_turns=700,
                  rr_queries=200, hops=200, idle_s=10.0, forget_days=1080, takeover_turns=3000, recovery_turns=2000, repeats=3,
                  scale_turns=1500, handoff_turns=4000, scale_repeats=3)
    )
    figures: dict[str, Any] = {"quick": quick, "machine": machine(), "broker": broker_in_use(settings)}
    progress("extraction")
    _part(partial, figures)
    figures.update(extraction_figures(size["extract"], size["repeats"]))
    progress("the fold alone")
    _part(partial, figures)
    figures.update(fold_figures(size["fold_turns"], size["repeats"]))
    progress("English and Chinese in process")
    _part(partial, figures)
    figures.update(language_figures(size["language_turns"], size["repeats"]))
    progress("queries on the synthetic graph")
    _part(partial, figures)
    figures.update(query_figures(size["concepts"], size["edges"], size["queries"], size["repeats"]))
    progress("sealing a turn's words")
    _part(partial, figures)
    figures.update(sealing_figures(size["language_turns"], size["repeats"]))
    progress("forgetting a turn")
    _part(partial, figures)
    figures.update(forget_figures(size["forget_days"], size["repeats"]))
    progress("recovery from a checkpoint, in process")
    _part(partial, figures)
    figures.update(in_process_recovery_figures(size["recovery_turns"], size["repeats"], settings.graph))
    _part(partial, figures)
    figures.update(pipeline_figures(settings, size, progress))
    _part(partial, figures)
    figures.update(takeover_figures(settings, size["takeover_turns"], size["repeats"], progress))
    progress("scaling out: CPU per turn, hand-offs")
    handoff_history = history_log(conversations(size["handoff_turns"], Shape(graphs=SCALE_GRAPHS)), 1, settings.graph).log
    _part(partial, figures)
    figures.update(scaling_figures(settings, size, handoff_history, progress))
    figures["limits"] = limits(figures)
    return figures


def _part(partial: Callable[[dict[str, Any]], None] | None, figures: dict[str, Any]) -> None:
    if partial is not None:
        partial(figures)


def _limit_line(name: str, limit: dict[str, Any]) -> str:
    met = {True: "met", False: "NOT met", None: "not measured"}[limit["met"]]
    return f"{name:>30}: {str(limit['ratio']):>10}  ({limit['of']}; goal {limit['goal']}: {met})"


def format_figures(figures: dict[str, Any]) -> str:
    lines = []
    for name, value in figures.items():
        if isinstance(value, dict) and "median" in value:
            lines.append(f"{name:>30}: {value['median']:>10}  (min {value['min']}, max {value['max']}, {value['repeats']} repeats)")
        elif name == "limits":
            lines.append(f"{'limits':>30}:")
            lines.extend(_limit_line(limit, v) for limit, v in value.items())
        elif name != "machine":
            lines.append(f"{name:>30}: {value}")
    return "\n".join(lines)
