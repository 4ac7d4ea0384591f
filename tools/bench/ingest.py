"""Ingest: publish -> applied and visible to queries, end to end on the broker."""

from __future__ import annotations

import asyncio

from emgas.processors.events import Turn
from emgas.streams.interfaces.client import MemoryClient
from emgas.streams.settings import Settings
from emgas.tools.figures import Progress
from emgas.tools.harness import ingest_s, synthetic_turns
from emgas.testing import wait_for_turns


async def ready(settings: Settings, graphs: list[str]) -> None:
    async with MemoryClient(settings) as client:
        await wait_for_turns(client, {g: 0 for g in graphs}, deadline_s=120)


def tagged(turns: int, tag: str) -> list[Turn]:
    """`turns` demo turns over 8 graphs, with turn ids no other batch has."""
    return [t.model_copy(update={"turn_id": f"{tag}-{t.turn_id}"}) for t in synthetic_turns(turns, graphs=8)]


def ingest_rates(
    live: Settings, turns: int, repeats: int, tag: str, totals: dict[str, int], progress: Progress
) -> list[float]:
    rates = []
    for r in range(repeats):
        batch = tagged(turns, f"{tag}{r}")
        progress(f"ingest {tag} {r + 1}/{repeats}")
        rates.append(turns / asyncio.run(ingest_s(live, batch, totals)))
    return rates
