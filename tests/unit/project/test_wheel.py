"""The built distribution: one top-level package, `emgas`, with the product and not the tools."""

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    # No build isolation: the build uses this environment's setuptools, so it needs no network.
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out), str(ROOT)],
        capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    [built] = out.glob("emgas-*.whl")
    return built


def test_the_wheel_holds_only_the_emgas_package_and_no_tools(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    tops = {name.split("/")[0] for name in names}
    assert {top for top in tops if not top.endswith(".dist-info")} == {"emgas"}
    layers = {name.split("/")[1] for name in names if name.startswith("emgas/") and name.count("/") >= 2}
    assert layers == {"processors", "state", "service", "replay", "streams"}
    assert "emgas/testing.py" in names  # the test drivers users' tests import
    assert "emgas/streams/cli/main.py" in names and "emgas/processors/events/graph.py" in names
    assert {"emgas/streams/runtime/compose.py", "emgas/streams/interfaces/memory.py", "emgas/streams/kafka/node.py"} <= set(names)
    assert "emgas/streams/runtime/web/viewer.html" in names  # the viewer's page is package data
    assert "emgas/streams/kafka/broker/pom.xml" in names  # the pinned Kafka's Maven project
    assert not [n for n in names if "/tools/" in n or n.endswith(".jsonl")]
    dist_info = next(n.split("/")[0] for n in names if n.endswith(".dist-info/METADATA"))
    archive = zipfile.ZipFile(wheel)
    assert archive.read(f"{dist_info}/top_level.txt").decode().split() == ["emgas"]
    assert "emgas = emgas.__main__:console" in archive.read(f"{dist_info}/entry_points.txt").decode()


def test_the_installed_wheel_imports_and_says_where_the_tools_are(wheel, tmp_path):
    target = tmp_path / "site"
    done = subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), str(wheel)],
        capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    probe = (
        # As on a machine without this checkout: no editable install's finder.
        "import sys\n"
        "sys.meta_path[:] = [f for f in sys.meta_path if not getattr(f, '__module__', '').startswith('__editable__')]\n"
        "import importlib.util, emgas, emgas.streams.cli.main as cli, emgas.processors.events\n"
        "print(emgas.__file__)\n"
        "print(importlib.util.find_spec('emgas.tools') is None, cli.tool_commands() == ())\n"
        "print(cli._parser().epilog)\n"
    )
    # The wheel's `emgas` comes first on the path; the dependencies come from this environment.
    env = {**os.environ, "PYTHONPATH": str(target)}
    out = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    where, missing, note = out.stdout.splitlines()[:3]
    assert where.startswith(str(target))
    assert missing == "True True"
    assert "checkout" in note and "demo" in note
