"""Errors raised by the Kafka adapters, the client and the CLI."""


class StreamsError(Exception):
    """Root of every error raised by `streams`."""


class BrokerError(StreamsError):
    """The broker cannot be started, reached or used."""


class ConfigError(StreamsError):
    """The settings are incomplete or inconsistent."""


class QueryTimeout(StreamsError):
    """No reply arrived for a query within its deadline."""


class InputFileError(StreamsError):
    """A file given to the CLI cannot be read as the expected JSON lines."""


class RequestError(StreamsError):
    """A request the client was asked to send is not valid (e.g. an empty turn id)."""


class WorkerStopped(StreamsError):
    """The worker ended itself: it found something it must not go on with."""


class ServingStopped(StreamsError):
    """The worker is stopping: its producer is gone, so no query is answered here any more."""
