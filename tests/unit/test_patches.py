"""The patches of Faust and aiokafka internals are tied to the pinned versions."""

import re
import tomllib
from pathlib import Path

import pytest

from emgas.streams.runtime.patches import PINNED, UnpatchableVersion, check_versions

ROOT = Path(__file__).resolve().parents[2]


def test_the_patched_versions_are_the_pinned_ones():
    dependencies = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    pins = dict(re.fullmatch(r"([\w-]+)==([\w.]+)", d).groups() for d in dependencies if "==" in d)
    assert {name: pins[name] for name in PINNED} == PINNED


def test_the_installed_versions_pass():
    check_versions()


@pytest.mark.parametrize("name", sorted(PINNED))
def test_another_version_is_refused_in_one_line_naming_the_library(name):
    other = {**PINNED, name: "9.9.9"}
    with pytest.raises(UnpatchableVersion) as refused:
        check_versions(other.__getitem__)
    assert f"{name} 9.9.9 is installed" in str(refused.value) and "\n" not in str(refused.value)
