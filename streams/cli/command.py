"""How a command of `emgas` is described: its name, help line, what runs it and its arguments.

The parser (`streams.cli.main`) is built from these descriptions, the product's
and the tools' alike.
"""

from __future__ import annotations

import argparse
import signal
from dataclasses import dataclass
from typing import Any, Callable

from emgas.streams.settings import Settings


@dataclass(frozen=True)
class Arg:
    """One argument of a command: `add_argument`'s flags and options."""

    flags: tuple[str, ...]
    options: dict[str, Any]

    def add_to(self, parser: Any) -> None:
        parser.add_argument(*self.flags, **self.options)


@dataclass(frozen=True)
class OneOf:
    """Arguments of which exactly one must be given (at most one, if not `required`)."""

    args: tuple[Arg, ...]
    required: bool = True

    def add_to(self, parser: argparse.ArgumentParser) -> None:
        group = parser.add_mutually_exclusive_group(required=self.required)
        for argument in self.args:
            argument.add_to(group)


@dataclass(frozen=True)
class Command:
    """One `emgas` command: its name, its help line, what runs it and its arguments."""

    name: str
    help: str
    run: Callable[[Settings, argparse.Namespace], int]
    args: tuple[Arg | OneOf, ...] = ()


def arg(*flags: str, **options: Any) -> Arg:
    return Arg(flags, options)


def unwind_on_sigterm() -> None:
    """A SIGTERM raises SystemExit(143) in the main thread, so that what a
    command started (a broker's JVM, workers) is stopped by its `finally`
    blocks instead of being left running (Python's default ends the process
    at once)."""
    signal.signal(signal.SIGTERM, _raise_exit)


def _raise_exit(*_: object) -> None:
    raise SystemExit(128 + signal.SIGTERM)
