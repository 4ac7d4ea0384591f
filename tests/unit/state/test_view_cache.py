"""The in-memory graphs of a partition: loaded on use, evicted when unused."""

from emgas.processors.dynamics import DecayParams
from emgas.processors.graph import GraphRef
from emgas.state.view import GraphView
from emgas.state.view_cache import Views

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


def _snapshot_pair_by_pair(view: GraphView, minimum: int) -> dict:
    """The pairs of `view.snapshot`, read row by row (what it computes in arrays)."""
    pairs = {}
    for cid, i in view.index.items():
        idx, counts = view._adjacency.row(i)
        for j, count in zip(idx.tolist(), counts.tolist()):
            if count >= minimum and cid < view.ids[j]:
                pairs[(cid, view.ids[j])] = count
    return pairs


def test_a_views_snapshot_holds_its_live_pairs_of_at_least_the_count_asked():
    from emgas.processors.graph import GraphParams
    from emgas.tools.bench.core import synthetic_log
    from emgas.testing import LocalLog
    from emgas.tools.synthetic import conversations

    log = LocalLog(GraphParams())
    log.extend(synthetic_log(conversations(600), GraphParams()))
    checked = 0
    for view in log.state.views.loaded().values():
        for cid in sorted(view.index)[::7]:  # as a tick removes concepts: their slots stay, dead
            view.remove_concept(cid)
        assert len(view.index) < len(view.ids)
        for minimum in (1, 3):
            counts, texts, pairs = view.snapshot(minimum)
            assert pairs == _snapshot_pair_by_pair(view, minimum) and set(counts) == set(texts) == set(view.index)
            checked += len(pairs)
    assert checked > 0


def test_rows_gathered_at_once_are_each_slots_row_read_alone():
    from emgas.processors.graph import GraphParams
    from emgas.tools.bench.core import synthetic_log
    from emgas.testing import LocalLog
    from emgas.tools.synthetic import conversations

    log = LocalLog(GraphParams())
    log.extend(synthetic_log(conversations(300), GraphParams()))
    view = max(log.state.views.loaded().values(), key=lambda view: len(view.ids))
    view.remove_concept(next(iter(view.index)))  # a dead slot has no row
    slots = [0, *range(len(view.ids) - 1, 0, -3), 5, 5]  # any order, a slot twice
    alone = [tuple(a.tolist() for a in view._adjacency.full_row(slot)) for slot in slots]
    assert view.slot_rows(slots) == alone and any(row[0] for row in alone)
    assert view.slot_rows([]) == []


def test_a_querys_neighbours_compute_each_row_once_and_a_new_one_sees_new_counts(monkeypatch):
    from emgas.processors.graph import GraphParams
    from emgas.state import view as view_module
    from emgas.tools.bench.core import synthetic_log
    from emgas.testing import LocalLog
    from emgas.tools.synthetic import conversations

    events = synthetic_log(conversations(300), GraphParams())
    gid = events[0].graph_id
    later = [e for e in events if e.type == "turn_ingested" and e.graph_id == gid][-10:]
    log = LocalLog(GraphParams())
    log.extend([e for e in events if e not in later])
    graph = log.state.view(gid)
    computed = []
    real = view_module.outgoing_weights
    monkeypatch.setattr(view_module, "outgoing_weights", lambda *a: computed.append(1) or real(*a))
    hub = max(range(graph.size), key=lambda i: len(graph.neighbour_counts(i)[0]))
    weighted = graph.neighbours("ppmi_norm", True)
    idx, before = weighted(hub)
    assert weighted(hub)[1] is before and len(computed) == 1  # kept for the query
    log.extend(later)
    again = log.state.view(gid).neighbours("ppmi_norm", True)
    assert again(hub)[1].tolist() != before.tolist() and len(computed) == 2  # a new query: the new counts
