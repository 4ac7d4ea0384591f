"""The canonical digest: equal content gives equal digests, any change shows."""

import hashlib
from collections.abc import Iterator
import json
from datetime import timezone

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from emgas.processors.events import GraphDigest, SectionDigest
from emgas.processors.graph import GraphParams, GraphRef, Passage
from emgas.replay.verify import differences
from emgas.state import kernels, keys
from emgas.state.rows import encode_row
from emgas.state import links
from emgas.state.digest import (
    HASH_CHUNK, _hash_lines, _Version, as_dumped, canonical_json, graph_digest, pair_line, pair_lines, pair_section,
    partition_digests, passage_lines,
)
from emgas.state.memory import MemoryStore
from emgas.state.projector import PartitionState
from emgas.state.repository import GraphRepository
from emgas.state.rocks import RocksStore
from tests.support.factories import ingested

G = GraphRef("g", 1)
TURNS = [
    ingested("g", "t1", {"kafka": 0.9, "lag": 0.5}, minute=1),
    ingested("g", "t2", {"kafka": 0.4, "postgres": 0.7}, minute=5),
    ingested("g", "t3", {"lag": 0.3, "postgres": 0.2, "replica": 0.6}, minute=9),
]


def retold(record: bytes) -> bytes:
    """A passage record with another text (its links, the concepts it names, unchanged)."""
    return Passage.model_validate_json(record).model_copy(update={"text": "retold"}).model_dump_json().encode()


def build(events, store=None) -> PartitionState:
    state = PartitionState(store or MemoryStore(), GraphParams())
    for offset, event in enumerate(events):
        state.apply(event, offset)
    return state


def test_memory_and_rocksdb_states_have_the_same_digest(tmp_path):
    assert graph_digest(build(TURNS).repo, G) == graph_digest(build(TURNS, RocksStore(tmp_path / "db")).repo, G)


def test_other_graphs_and_offsets_do_not_change_a_graphs_digest():
    mixed = [ingested("h", "x", {"cat": 0.5}), TURNS[0], ingested("h", "y", {"dog": 0.5}), *TURNS[1:]]
    assert graph_digest(build(mixed).repo, G) == graph_digest(build(TURNS).repo, G)


@pytest.mark.parametrize(
    ("section", "change"),
    [
        ("meta", lambda store: store.write({keys.graph_meta(G): b'{"turns": 9}'})),
        ("pairs", lambda store: store.write({keys.row(G, "kafka"): encode_row({"lag": (7, 0)})})),
        ("sources", lambda store: store.write({keys.unlinked(G, "t1", "kafka"): b""})),
        ("passages", lambda store: store.write({keys.passage(G, "t1"): retold(store.get(keys.passage(G, "t1")))})),
    ],
)
def test_any_change_of_state_changes_the_digest_and_names_the_section(section, change):
    before = graph_digest(build(TURNS).repo, G)
    state = build(TURNS)
    state.commit()  # the pair rows the view kept are written: the change below is to the stored state
    change(state.repo.store)
    after = graph_digest(state.repo, G)
    assert after.digest != before.digest
    assert [n for n in before.sections if before.sections[n] != after.sections[n]] == [section]
    assert differences([before], [after]) and section in differences([before], [after])[0]


def test_a_concepts_metadata_is_part_of_the_digest():
    before = build(TURNS)
    after = build([*TURNS[:2], TURNS[2].model_copy(update={"timestamp": TURNS[2].timestamp.replace(year=2030)})])
    a, b = graph_digest(before.repo, G), graph_digest(after.repo, G)
    assert a.sections["concepts"] != b.sections["concepts"]


@settings(max_examples=30, deadline=None)
@given(st.permutations(range(6)), st.lists(st.floats(0.01, 1.0), min_size=18, max_size=18))
def test_only_passage_positions_depend_on_the_order_turns_are_applied_in(order, weights):
    """Counts, concepts and their activations do not depend on the order of
    turns (between two decay ticks); a passage's position in the
    conversation (`seq`, its place in the log) does, and only that."""
    concepts = ["a", "b", "c", "d"]
    turns = [
        ingested("g", f"t{i}", {concepts[(i + j) % 4]: weights[3 * i + j] for j in range(3)}, minute=i)
        for i in range(6)
    ]
    shuffled, ordered = graph_digest(build([turns[i] for i in order]).repo, G), graph_digest(build(turns).repo, G)
    assert {n: d for n, d in shuffled.sections.items() if n != "passages"} == {
        n: d for n, d in ordered.sections.items() if n != "passages"
    }
    positions = {t: p.seq for t, p in build([turns[i] for i in order]).repo.passages(G, [t.turn_id for t in turns]).items()}
    assert positions == {turns[i].turn_id: place for place, i in enumerate(order)}


def test_partition_digests_lists_every_version_and_marks_the_active_one():
    state = build([*TURNS, TURNS[0].model_copy(update={"graph_version": 2})])
    got = {(d.graph_id, d.version, d.active) for d in partition_digests(state.repo)}
    assert got == {("g", 1, True), ("g", 2, False)}


def _digest(graph: str, version: int, digest: str, **counts: int) -> GraphDigest:
    sections = {n: SectionDigest(count=c, digest=f"{n}{c}") for n, c in counts.items()}
    return GraphDigest(graph_id=graph, version=version, active=True, digest=digest, sections=sections)


def test_differences_name_missing_graphs_and_differing_sections():
    live = [_digest("a", 1, "x", concepts=3, pairs=2), _digest("b", 1, "y", concepts=1)]
    log = [_digest("a", 1, "z", concepts=3, pairs=3), _digest("c", 1, "w", concepts=1)]
    assert differences(live, log) == [
        "graph 'a' v1: pairs differ (live: 2 records, log: 3 records)",
        "graph 'b' v1: in the live state but not in the log",
        "graph 'c' v1: in the log but not in the live state",
    ]
    assert differences(live, live) == []


@given(st.text(), st.text(), st.integers(min_value=0, max_value=2**63 - 1), st.integers(min_value=-(2**63), max_value=2**63 - 1))
def test_a_pair_line_is_the_canonical_json_of_the_pair(a, b, count, last):
    assert pair_line(a, b, count, last) == json.dumps(
        [[a, b], [count, last]], sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )


@given(st.lists(st.text(), max_size=50).map(lambda lines: lines * (HASH_CHUNK // 20)))  # many chunks, and a part
@example([f"line {k}" for k in range(2 * HASH_CHUNK)])  # whole chunks only
@example([])
@settings(max_examples=25)
def test_lines_hashed_in_chunks_hash_as_one_by_one(lines):
    one_by_one = hashlib.sha256()
    for line in lines:
        one_by_one.update(line.encode() + b"\n")
    assert _hash_lines(iter(lines)) == SectionDigest(count=len(lines), digest=one_by_one.hexdigest())
    assert _hash_lines(line.encode() for line in lines) == _hash_lines(iter(lines))  # lines as UTF-8 bytes


def test_a_record_of_an_older_format_is_read_through_its_model():
    """A concept stored without the fields later formats added digests as the
    same concept with their defaults: its JSON is read through the model."""
    state = build(TURNS)
    state.commit()
    key = keys.concept(G, "kafka")
    complete = json.loads(state.repo.store.get(key))
    before = graph_digest(state.repo, G)
    older = {k: v for k, v in complete.items() if k not in ("retrievals", "first_retrieved", "last_retrieved")}
    assert older != complete
    state.repo.store.write({key: json.dumps(older).encode()})
    assert graph_digest(state.repo, G) == before
    state.repo.store.write({key: json.dumps({**complete, "count": complete["count"] + 1}).encode()})
    assert graph_digest(state.repo, G).sections["concepts"] != before.sections["concepts"]


TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",)))  # what UTF-8 can hold
METADATA = st.one_of(
    TEXT, st.booleans(), st.none(), st.integers(),  # ints past 64 bits too
    st.floats(allow_nan=False, allow_infinity=False),
)


class _Passages:
    """What `passage_lines` reads of a version: its passages' prefix and (key, raw, parsed) records."""

    def __init__(self, passages: list[Passage]) -> None:
        self.passage_prefix = keys.section(G, b"t")
        raws = [(self.passage_prefix + p.turn_id.encode(), p.model_dump_json().encode()) for p in passages]
        self.passages = [(key, raw, json.loads(raw)) for key, raw in sorted(raws)]


@given(st.lists(
    st.builds(
        Passage, turn_id=st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), min_size=1),
        speaker=TEXT, text=TEXT, session_id=st.none() | TEXT,
        timestamp=st.datetimes(timezones=st.just(timezone.utc)),
        metadata=st.dictionaries(TEXT, METADATA, max_size=4),
        concept_ids=st.lists(TEXT.filter(bool), max_size=4).map(tuple), seq=st.integers(0, 2**40),
    ),
    max_size=5, unique_by=lambda p: p.turn_id,
))
@example([Passage(turn_id="t\u2028", speaker="\x1f", text='"\\\n\x7f\ud7ff\U0001f600', timestamp="2026-01-01T00:00:00Z",
                  metadata={"w": 1e-07, "big": 2**70, "n": -(2**63)}, concept_ids=("é",))])
def test_a_passage_line_is_the_canonical_json_of_the_passage(passages):
    """orjson's lines (and canonical_json's, where a value holds a float)
    are the bytes of `canonical_json([[turn id], passage])`, the passage as
    the digest has always read it (`as_dumped`: by orjson, which reads an
    int past 64 bits as a float)."""
    version = _Passages(passages)
    render = as_dumped(Passage)
    expected = [
        canonical_json([keys.split_tail(key, version.passage_prefix), render(raw)]).encode()
        for key, raw, _ in version.passages
    ]
    assert list(passage_lines(version)) == expected  # type: ignore[arg-type]


@given(st.lists(st.tuples(TEXT.filter(bool), st.lists(st.sampled_from(["a", "b", "é", "Z", "\U0001f600", "a b"]), unique=True)),
                unique_by=lambda p: p[0], max_size=8),
       st.data())
def test_links_are_by_concept_then_turn_in_the_keys_byte_order(passages, data):
    """Grouped by concept in the passages' key order, the links come out as
    sorting each (concept, turn) by its UTF-8 bytes gives them, less the unlinked."""
    passages = sorted(passages, key=lambda p: p[0].encode())
    unlinked = {t: set(data.draw(st.lists(st.sampled_from(c)))) for t, c in passages if c and data.draw(st.booleans())}
    by_concept = links.turns_by_concept(passages, unlinked)
    grouped = [(cid, t) for cid in sorted(by_concept) for t in by_concept[cid]]
    expected = sorted(((c, t) for t, cs in passages for c in cs if c not in unlinked.get(t, ())),
                      key=lambda link: (link[0].encode(), link[1].encode()))
    assert grouped == expected


ROW_ID = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=6)
INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)


@given(st.lists(ROW_ID, unique=True, max_size=8).map(sorted), st.data())
@example(["", "\x01", "\x1f", "\x7f", "\"", "\\", "\b\f\n\r\t", "é中😀"], None)
@settings(deadline=None)  # its first example loads the kernels
def test_the_pair_section_is_the_pair_lines_written_at_once(ids, data):
    """The compiled loop writes every row's upper entries as `pair_lines`
    does, escapes and ints of any size included: the same bytes, the same digest."""
    kernels.warm()  # else the section is `pair_lines`' own (below)
    rows = []
    for cid in ids:
        others = [] if data is None else data.draw(st.lists(st.sampled_from(ids), unique=True).map(sorted))
        values = [(k, -k) for k in range(len(ids))] if data is None else data.draw(
            st.lists(st.tuples(INT64, INT64), min_size=len(others), max_size=len(others)))
        row = dict(zip(ids if data is None else others, values))
        row.pop(cid, None)
        rows.append((keys.row(G, cid), encode_row(row)))
    store = MemoryStore()
    store.write(dict(rows))
    in_key_order = ((key[len(keys.section(G, b"r")):].decode(), raw) for key, raw in sorted(rows))  # as the store reads them
    expected = "".join(f"{line}\n" for line in pair_lines(in_key_order))
    section = pair_section(_Version(GraphRepository(store), G))
    assert not isinstance(section, Iterator) and bytes(section.data) == expected.encode()
    assert _hash_lines(section) == _hash_lines(iter(expected.split("\n")[:-1]))


@pytest.mark.parametrize("record", [
    b"\x00\x00\x00\x01" + bytes(16) + b"\xff",  # its neighbour's id not UTF-8
    b"\x00\x00\x00\x02" + bytes(16) + b"b",  # two entries, the bytes of one
    b"\x00\x00",  # not even its count
])
def test_a_row_not_as_its_layout_says_is_refused_by_the_digest(record):
    kernels.warm()
    store = MemoryStore()
    store.write({keys.row(G, "a"): record})
    with pytest.raises(ValueError, match="not as its layout says"):
        pair_section(_Version(GraphRepository(store), G))


def test_a_process_without_the_folds_kernels_writes_the_pair_lines_in_python(monkeypatch):
    """A digest does not compile the fold's kernels for itself (`emgas digest`
    on a fresh machine): before a fold or a replay loaded them, the lines
    are `pair_lines`', the same."""
    state = build(TURNS)
    kernels.warm()
    joined = pair_section(_Version(state.repo, G))
    monkeypatch.setattr(kernels, "loaded", lambda: False)
    lines = pair_section(_Version(state.repo, G))
    assert isinstance(lines, Iterator)
    assert _hash_lines(lines) == _hash_lines(joined) and _hash_lines(joined).count == 5
