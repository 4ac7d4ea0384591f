"""Errors raised while reading the log back."""


class ReplayError(Exception):
    """Root of every error raised by `replay`."""


class LogUnavailable(ReplayError):
    """The broker cannot be reached, or the topic or partition does not exist."""


class LogTruncated(ReplayError):
    """Events needed for a rebuild are no longer in the log (retention)."""


class SnapshotCorrupt(ReplayError):
    """A snapshot in the log does not restore to the digests its writer computed."""


class SnapshotErased(ReplayError):
    """A checkpoint's snapshot is sealed under a key that was erased (it was
    written before a forget): the log before it must be folded instead."""
