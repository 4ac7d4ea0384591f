"""A bug in one rule of the fold, for tests of what a rejection looks like.

Decoding refuses the values that cannot be right, so an event the fold
rejects is one a rule cannot apply: a bug. `install()` makes the retrieval
rule raise for requests whose id starts with `POISON`, the same in every
process that installs it: the tests' own, and a worker or `emgas replay`
started with `environment()` (its `sitecustomize` installs it at start-up).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable

POISON = "poison"


class RuleBug(RuntimeError):
    """What the buggy rule raises."""


def install() -> Callable[[], None]:
    """Install the bug; returns what puts the rule back."""
    from dataclasses import replace

    from emgas.processors.events import Retrieved
    from emgas.state import rules

    rule = rules.RULES[Retrieved]
    applies = rule.evolve
    if getattr(applies, "rule_bug", False):
        return lambda: None

    def buggy(event, slice_, params):  # noqa: ANN001, ANN202 - the rule's signature
        if event.request_id.startswith(POISON):
            raise RuleBug(f"a bug in the retrieval rule (request {event.request_id})")
        return applies(event, slice_, params)

    buggy.rule_bug = True  # type: ignore[attr-defined]
    rules.RULES[Retrieved] = replace(rule, evolve=buggy)  # type: ignore[index]

    def uninstall() -> None:
        rules.RULES[Retrieved] = rule  # type: ignore[index]

    return uninstall


def environment() -> dict[str, str]:
    """Environment variables that make a Python process start with the bug installed."""
    here = str(Path(__file__).parent / "rule_bug")
    return {"PYTHONPATH": os.pathsep.join(p for p in (here, os.environ.get("PYTHONPATH")) if p)}
