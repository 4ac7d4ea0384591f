"""The limits each speed figure is held to: ratios to a bound measured in the same run."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable


@dataclass(frozen=True)
class Limit:
    """A ratio of median figures that should stay within `goal`."""

    ratio: str  # how it is computed, as printed
    compute: Callable[[Callable[[str], float]], float]  # from a median lookup
    goal: float
    at_least: bool  # True: ratio >= goal; False: ratio <= goal


LIMITS = {
    "fold_vs_extraction": Limit(
        "fold_events_per_s / extract_turns_per_s",
        lambda m: m("fold_events_per_s") / m("extract_turns_per_s"), 0.5, True,
    ),
    # A worker's CPU per turn (one worker, six partitions) in extractions of a turn.
    "worker_cpu_vs_extraction": Limit(
        "worker_cpu_ms_per_turn_1 * extract_turns_per_s / 1000",
        lambda m: m("worker_cpu_ms_per_turn_1") * m("extract_turns_per_s") / 1000, 7.0, False,
    ),
    # The median of each repeat's Chinese rate over its English one, the two
    # measured one after the other (`language_figures`).
    "chinese_vs_english": Limit(
        "ingest_in_process_zh_vs_en (per repeat: _turns_per_s_zh / _turns_per_s_en)",
        lambda m: m("ingest_in_process_zh_vs_en"), 0.8, True,
    ),
    # Sealing each turn's words (`processors.sealing`) costs ingest and
    # replay at most a tenth: each repeat's sealed rate over its unsealed one.
    "ingest_sealed_vs_unsealed": Limit(
        "ingest_sealed_vs_unsealed (per repeat, in process)",
        lambda m: m("ingest_sealed_vs_unsealed"), 0.9, True,
    ),
    "replay_sealed_vs_unsealed": Limit(
        "replay_sealed_vs_unsealed (per repeat, in process)",
        lambda m: m("replay_sealed_vs_unsealed"), 0.9, True,
    ),
    "replay_vs_log_read": Limit(
        "replay_events_per_s / log_read_events_per_s",
        lambda m: m("replay_events_per_s") / m("log_read_events_per_s"), 0.5, True,
    ),
    "ingest_vs_passthrough": Limit(
        "ingest_turns_per_s / passthrough_turns_per_s",
        lambda m: m("ingest_turns_per_s") / m("passthrough_turns_per_s"), 0.5, True,
    ),
    "round_trip_vs_hops": Limit(
        "rr_p50_ms / (2 * kafka_hop_p50_ms + rr_worker_p50_ms)",
        lambda m: m("rr_p50_ms") / (2 * m("kafka_hop_p50_ms") + m("rr_worker_p50_ms")), 1.3, False,
    ),
    "takeover_history_10x_vs_1x": Limit(
        "takeover_s_history_10x / takeover_s_history_1x",
        lambda m: m("takeover_s_history_10x") / m("takeover_s_history_1x"), 1.5, False,
    ),
    "takeover_snapshots_vs_none_10x": Limit(
        "takeover_s_history_10x_no_snapshots / takeover_s_history_10x",
        lambda m: m("takeover_s_history_10x_no_snapshots") / m("takeover_s_history_10x"), 5.0, True,
    ),
    # The work divides: the same turns cost the workers no more CPU in all when there are more of them.
    "worker_cpu_2_vs_1": Limit(
        "worker_cpu_ms_per_turn_2 / worker_cpu_ms_per_turn_1",
        lambda m: m("worker_cpu_ms_per_turn_2") / m("worker_cpu_ms_per_turn_1"), 1.15, False,
    ),
    "worker_cpu_3_vs_1": Limit(
        "worker_cpu_ms_per_turn_3 / worker_cpu_ms_per_turn_1",
        lambda m: m("worker_cpu_ms_per_turn_3") / m("worker_cpu_ms_per_turn_1"), 1.15, False,
    ),
}


def limits(figures: dict[str, Any]) -> dict[str, Any]:
    """Each limit's ratio of the median figures, its goal and whether it is
    met (ratio and met None where a figure is missing)."""

    def median(name: str) -> float:
        value = figures.get(name)
        if not isinstance(value, dict):
            raise KeyError(name)
        return value["median"]

    out = {}
    for name, limit in LIMITS.items():
        try:
            ratio: float | None = round(limit.compute(median), 3)
        except (KeyError, ZeroDivisionError):
            ratio = None
        met = None if ratio is None else (ratio >= limit.goal if limit.at_least else ratio <= limit.goal)
        out[name] = {"ratio": ratio, "of": limit.ratio, "goal": f"{'>=' if limit.at_least else '<='} {limit.goal}", "met": met}
    return out
