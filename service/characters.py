"""Which concepts of a graph contain a given Chinese character, for
character seeds (`processors.expansion.character_seeds`).

Kept per graph version beside its view and extended as the view grows (its
concept slots only ever append), so a query never rebuilds it whole. At
most MAX_GRAPHS graphs are kept, the least recently asked dropped first.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from emgas.processors.chinese import cjk_runs
from emgas.processors.graph import GraphRef
from emgas.state.view import GraphView

MAX_GRAPHS = 64


class CharacterIndex:
    """character -> the concept ids (of slots seen so far) that contain it."""

    def __init__(self) -> None:
        self._graphs: OrderedDict[GraphRef, tuple[int, dict[str, list[str]]]] = OrderedDict()
        self._lock = threading.Lock()

    def containing(self, view: GraphView, character: str) -> list[str]:
        """The concepts of `view` that contain `character` and are held now, sorted."""
        with self._lock:
            seen, index = self._graphs.pop(view.ref, (0, {}))
            for cid in view.ids[seen:]:
                for ch in dict.fromkeys("".join(cjk_runs(cid))):
                    index.setdefault(ch, []).append(cid)
            self._graphs[view.ref] = (len(view.ids), index)
            while len(self._graphs) > MAX_GRAPHS:
                self._graphs.popitem(last=False)
            found = list(index.get(character, ()))
        return sorted({cid for cid in found if cid in view.index})
