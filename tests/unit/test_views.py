"""The in-memory graphs of a partition: loaded on use, evicted when unused."""

from emgas.processors.dynamics import DecayParams
from emgas.processors.graph import GraphRef
from emgas.state.view import GraphView
from emgas.state.views import Views

G, H = GraphRef("g", 1), GraphRef("h", 1)


def views() -> tuple[Views, list[GraphRef]]:
    loads: list[GraphRef] = []
    return Views([G, H], lambda ref: loads.append(ref) or GraphView(ref, DecayParams())), loads


def test_every_version_held_is_a_member_and_its_view_loads_on_first_use():
    held, loads = views()
    assert (G in held, GraphRef("x", 1) in held, sorted(held), len(held)) == (True, False, [G, H], 2)
    assert loads == [] and held.loaded() == {}
    assert held[G] is held.get(G) and loads == [G]
    assert held.get(GraphRef("x", 1)) is None


def test_a_view_unused_for_more_than_the_rounds_is_evicted_and_loaded_again():
    held, loads = views()
    first = held[G]
    held[H]
    assert held.evict_unused(2) == [] and held.evict_unused(2) == []
    held[H]  # used: its count starts again
    assert held.evict_unused(2) == [G] and set(held.loaded()) == {H}
    assert G in held and held[G] is not first and loads == [G, H, G]
    assert held.evict_unused(0) == []  # 0: never


def test_removing_a_version_does_not_load_it():
    held, loads = views()
    assert held.pop(G, None) is None and G not in held and loads == []
    assert held.pop(G, "gone") == "gone"
