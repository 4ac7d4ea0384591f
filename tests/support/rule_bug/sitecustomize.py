"""Installs `tests.support.rule_bug` in a process started with it on PYTHONPATH."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[3]))  # the repository, for `tests.support`
from tests.support.rule_bug import install  # noqa: E402

install()
