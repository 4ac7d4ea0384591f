"""Flat records written by one orjson call and cut apart: each the bytes `dumps` writes alone."""

from datetime import datetime, timedelta, timezone

from hypothesis import given, settings
from hypothesis import strategies as st

from emgas.state.records import dumps, dumps_flat

scalars = st.one_of(
    st.none(), st.integers(-(2**63), 2**63 - 1), st.floats(allow_nan=False, allow_infinity=False), st.booleans(),
    st.text(), st.sampled_from(['},{"id":', '"}', "{", "\\"]),
    st.datetimes(timezones=st.sampled_from([timezone.utc, timezone(timedelta(hours=8))])),
)
record = st.builds(
    lambda cid, rest: {"id": cid, **rest},
    st.text(), st.dictionaries(st.text().filter(lambda k: k != "id"), scalars, max_size=5),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(record, max_size=8))
def test_each_record_is_what_dumps_writes_alone(records):
    assert dumps_flat(records, "id") == [dumps(fields) for fields in records]


def test_a_value_orjson_cannot_write_falls_back_to_each_record_alone():
    """A lone surrogate: that record's dumps is None (its model writes it), the others are written."""
    records = [{"id": "a", "text": "\ud800"}, {"id": "b", "when": datetime(2024, 1, 1, tzinfo=timezone.utc)}]
    assert dumps_flat(records, "id") == [None, b'{"id":"b","when":"2024-01-01T00:00:00Z"}']


def test_no_record_none_written():
    assert dumps_flat([], "id") == []
