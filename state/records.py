"""Records encoded without their models: orjson, byte for byte what
pydantic's `model_dump_json` writes for the same fields (compact, fields
in declaration order, UTF-8, floats as their shortest round trip, aware
datetimes in ISO 8601 with `Z` for UTC: `tests/unit/test_records.py`).

The fold writes thousands of concept and passage records per commit;
encoding each from its plain values skips building a model first.
"""

from __future__ import annotations

from typing import Any

import orjson

_OPTIONS = orjson.OPT_UTC_Z


def dumps(fields: dict[str, Any]) -> bytes | None:
    """`fields` as a record's JSON; None where orjson cannot write a value
    as pydantic would (an integer beyond 64 bits in metadata, a string that
    is not valid Unicode): the caller encodes its model then."""
    try:
        return orjson.dumps(fields, option=_OPTIONS)
    except (orjson.JSONEncodeError, TypeError):
        return None
