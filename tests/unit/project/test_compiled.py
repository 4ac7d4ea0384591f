"""The compiled modules a checkout builds (`make install`, emgas/_compiled.py):
loaded only while every source is as built, and the same fold as the pure ones."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from emgas import _compiled
from emgas._compiled import MANIFEST, build_tag, current_files, source_digest

ROOT = Path(__file__).resolve().parents[3]


def _build(folder: Path, root: Path, sources: dict[str, str], **changes) -> None:
    """A fake build in `folder` of modules whose sources are `sources` (name
    -> text, written under `root`), with a source of their layer not
    compiled (`pkg/c.py`): an empty file per module, and its manifest."""
    modules, digests = {}, {}
    for name, text in {**sources, "pkg.c": "z = 3\n"}.items():
        source = root / (name.replace(".", "/") + ".py")
        source.parent.mkdir(parents=True, exist_ok=True)
        source.write_text(text)
        digests[str(source.relative_to(root))] = source_digest(source)
        if name in sources:
            modules[name] = name.replace(".", "/") + build_tag()
            (folder / modules[name]).parent.mkdir(parents=True, exist_ok=True)
            (folder / modules[name]).write_bytes(b"")
    (folder / ("group__mypyc" + build_tag())).write_bytes(b"")
    modules["group__mypyc"] = "group__mypyc" + build_tag()
    (folder / MANIFEST).write_text(json.dumps({"tag": build_tag(), "modules": modules, "sources": digests, **changes}))


SOURCES = {"pkg.a": "x = 1\n", "pkg.b": "y = 2\n"}


def test_a_current_build_gives_every_module_and_its_shared_library(tmp_path):
    _build(tmp_path / "out", tmp_path, SOURCES)
    files = current_files(tmp_path / "out", tmp_path)
    assert set(files) == {"pkg.a", "pkg.b", "group__mypyc"}
    assert files["pkg.a"] == tmp_path / "out" / ("pkg/a" + build_tag())


@pytest.mark.parametrize("spoil, why", [
    (lambda root, out: (root / "pkg/b.py").write_text("y = 3\n"), "a source edited since the build"),
    (lambda root, out: (root / "pkg/c.py").write_text("z = 4\n"), "a source of their layer edited, not compiled"),
    (lambda root, out: (root / "pkg/b.py").unlink(), "a source gone"),
    (lambda root, out: (out / ("pkg/a" + build_tag())).unlink(), "a compiled file gone"),
    (lambda root, out: (out / ("group__mypyc" + build_tag())).unlink(), "the shared library gone"),
    (lambda root, out: (out / MANIFEST).write_text("{not json"), "a manifest this code cannot read"),
    (lambda root, out: (out / MANIFEST).write_text(json.dumps({"tag": build_tag()})), "a manifest without modules"),
    (lambda root, out: (out / MANIFEST).write_text(json.dumps([])), "a manifest of another shape"),
    (lambda root, out: (out / MANIFEST).unlink(), "no manifest"),
])
def test_a_build_not_current_gives_no_module_at_all(tmp_path, spoil, why):
    _build(tmp_path / "out", tmp_path, SOURCES)
    spoil(tmp_path, tmp_path / "out")
    assert current_files(tmp_path / "out", tmp_path) == {}, why


def test_a_build_for_another_interpreter_gives_none(tmp_path):
    _build(tmp_path / "out", tmp_path, SOURCES, tag=".cpython-39-x86_64-linux-gnu.so")
    assert current_files(tmp_path / "out", tmp_path) == {}


def _loaded_from(env: dict[str, str]) -> dict[str, bool]:
    """Per module of the checkout's build, whether a new interpreter loads it compiled."""
    names = sorted(name for name in current_files() if "." in name)
    code = ("import importlib, json, sys; from emgas._compiled import compiled; "
            "print(json.dumps({n: compiled(importlib.import_module(n)) for n in sys.argv[1:]}))")
    done = subprocess.run([sys.executable, "-c", code, *names], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **env}, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


needs_build = pytest.mark.skipif(
    not current_files(), reason="no current compiled build in build/compiled (make install builds it where a C compiler is)",
)


@needs_build
def test_the_checkouts_build_is_loaded_and_emgas_pure_turns_it_off():
    assert all(_loaded_from({"EMGAS_PURE": ""}).values())
    assert not any(_loaded_from({"EMGAS_PURE": "1"}).values())


# The tests of the compiled modules and of the fold through them: the golden
# digests, the fold's properties, the rules the tick groups are held to.
PURE_RUN = [
    "tests/unit/replay/test_golden.py", "tests/unit/state/test_fold_property.py", "tests/unit/state/test_tick_group.py",
    "tests/unit/state/test_turn_run.py", "tests/unit/state/test_adjacency.py", "tests/unit/state/test_mention_columns.py",
    "tests/unit/state/test_forget_request.py", "tests/unit/processors/test_evolve.py", "tests/unit/processors/test_dynamics.py",
]


@pytest.mark.slow
@needs_build
def test_the_pure_modules_fold_as_the_compiled_ones():
    """The fold's tests, run again on the pure modules in a new interpreter
    (this one, like the rest of the suite, runs the compiled ones)."""
    assert not _compiled.compiled(sys.modules["emgas"])  # the package itself is never compiled
    tests = PURE_RUN
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *tests], capture_output=True, text=True,
        timeout=600, env={**os.environ, "EMGAS_PURE": "1"}, cwd=ROOT,
    )
    assert done.returncode == 0, done.stdout[-3000:]
    assert " passed" in done.stdout and " failed" not in done.stdout
