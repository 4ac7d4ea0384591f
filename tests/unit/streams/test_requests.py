"""A request's client timeout as a record header (`streams.kafka.requests`)."""

import pytest

from emgas.streams.kafka.requests import TIMEOUT_HEADER, client_timeout_s, timeout_header


@pytest.mark.parametrize("timeout_s", [0.0004, 1.0, 30.0, 2.5])
def test_a_timeout_read_back_is_the_one_written_to_the_millisecond(timeout_s):
    assert client_timeout_s(timeout_header(timeout_s)) == max(0.001, round(timeout_s, 3))


@pytest.mark.parametrize("headers", [None, (), [("other", b"5")], [(TIMEOUT_HEADER, b"soon")],
                                     [(TIMEOUT_HEADER, b"0")], [(TIMEOUT_HEADER, b"-5")], [(TIMEOUT_HEADER, None)]])
def test_no_header_or_an_unreadable_one_says_nothing(headers):
    assert client_timeout_s(headers) is None
