"""Errors raised by the pure core."""


class CoreError(Exception):
    """Root of every error raised by `processors`."""


class DecodeError(CoreError):
    """Bytes that cannot be read as an event: carries a reason code for the DLQ.

    Codes: `not_utf8`, `not_json`, `not_object`, `invalid_fields`,
    `unknown_type`, `unknown_version`, `text_too_long`, `timestamp_out_of_range`.
    """

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


class QueryError(CoreError):
    """A well-formed query that cannot be answered (e.g. unknown graph)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
