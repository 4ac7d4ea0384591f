"""The import contracts in pyproject.toml hold: layers point down, the core imports no
clients, and inside streams/ the roles point down (cli <- runtime | interfaces <- kafka)."""

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]


def test_lint_imports_keeps_every_contract():
    command = shutil.which("lint-imports") or str(Path(sys.executable).parent / "lint-imports")
    if not Path(command).exists():
        pytest.fail("lint-imports is not installed: `pip install -e '.[test]'` installs import-linter")
    done = subprocess.run([command], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    assert len(contracts) == 3
    assert f"Contracts: {len(contracts)} kept, 0 broken." in done.stdout
