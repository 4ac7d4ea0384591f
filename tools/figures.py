"""How a repeated measurement is reported: its median, min and max (every bench)."""

from __future__ import annotations

import statistics
from typing import Any, Callable

Progress = Callable[[str], None]  # told what a bench is doing now, one line at a time


def figure(values: list[float], digits: int = 2) -> dict[str, Any]:
    """Median, min and max of repeated measurements."""
    return {
        "median": round(statistics.median(values), digits),
        "min": round(min(values), digits),
        "max": round(max(values), digits),
        "repeats": len(values),
    }
