"""The in-memory graphs of one partition: every graph version held is a key;
its `GraphView` is loaded from the store on first use and evicted when
unused for a while.

A view mirrors the store (its transaction included), so dropping one loses
nothing: the next use loads it again, its due-time heaps included
(`view.load_view`). Membership (`ref in views`) means "the version exists",
loaded or not, as the fold's guards need. `evict_unused` is called by the
worker's timer: a view not used since the last `rounds` calls is dropped.
"""

from __future__ import annotations

from typing import Callable, Iterator, MutableMapping

from emgas.processors.graph import GraphRef
from emgas.state.view import GraphView


class Views(MutableMapping[GraphRef, GraphView]):
    def __init__(
        self, refs: list[GraphRef], load: Callable[[GraphRef], GraphView],
        on_evict: Callable[[GraphRef, GraphView], None] | None = None,
    ) -> None:
        self._load = load
        self._on_evict = on_evict  # told before a view is dropped (it may hold changes not yet written)
        self._known: dict[GraphRef, None] = dict.fromkeys(refs)
        self._loaded: dict[GraphRef, GraphView] = {}
        self._idle: dict[GraphRef, int] = {}  # timer rounds since each loaded view was last used

    def __getitem__(self, ref: GraphRef) -> GraphView:
        view = self._loaded.get(ref)
        if view is None:
            if ref not in self._known:
                raise KeyError(ref)
            view = self._loaded[ref] = self._load(ref)
        self._idle[ref] = 0
        return view

    def __setitem__(self, ref: GraphRef, view: GraphView) -> None:
        self._known[ref] = None
        self._loaded[ref] = view
        self._idle[ref] = 0

    def __delitem__(self, ref: GraphRef) -> None:
        del self._known[ref]
        self._loaded.pop(ref, None)
        self._idle.pop(ref, None)

    def pop(self, ref: GraphRef, *default: object) -> object:  # type: ignore[override]
        """Remove `ref` without loading its view (the view, if it was loaded)."""
        if ref not in self._known:
            if default:
                return default[0]
            raise KeyError(ref)
        view = self._loaded.get(ref)
        del self[ref]
        return view

    def __contains__(self, ref: object) -> bool:
        return ref in self._known

    def __iter__(self) -> Iterator[GraphRef]:
        return iter(list(self._known))

    def __len__(self) -> int:
        return len(self._known)

    def loaded(self) -> dict[GraphRef, GraphView]:
        """The views in memory now (reading them loads nothing)."""
        return dict(self._loaded)

    def evict_unused(self, rounds: int) -> list[GraphRef]:
        """One timer round: drop the views not used in the last `rounds`
        rounds (0: never); the refs evicted."""
        if rounds <= 0:
            return []
        evicted = []
        for ref in list(self._loaded):
            idle = self._idle[ref] = self._idle.get(ref, 0) + 1
            if idle > rounds:
                if self._on_evict is not None:
                    self._on_evict(ref, self._loaded[ref])
                del self._loaded[ref]
                del self._idle[ref]
                evicted.append(ref)
        return evicted
