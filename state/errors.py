"""Errors raised by the state layer."""


class StateError(Exception):
    """Root of every error raised by `state`."""


class StoreClosed(StateError):
    """The store was used after `close()`."""


class StoreUnavailable(StateError):
    """A store cannot be opened (missing, corrupt, or locked by another process)."""
