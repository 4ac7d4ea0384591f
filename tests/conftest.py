"""Markers every test gets from where it lives.

Tests under tests/integration and tests/e2e start a broker or the command
line: each takes seconds to minutes, so they are `slow` (`make check` runs
the others, `make test` all of them)."""

from pathlib import Path

import pytest

SLOW_FOLDERS = {"integration", "e2e", "browser"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if SLOW_FOLDERS & set(Path(str(item.path)).relative_to(Path(__file__).parent).parts[:1]):
            item.add_marker(pytest.mark.slow)
