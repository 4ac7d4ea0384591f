"""`python -m emgas.tools.compiled`: the modules a forget's re-fold spends
most of its Python in, compiled by mypyc into `build/compiled/` (`make install`).

A forget re-folds its graph from a fold point, and much of that re-fold's
time in Python is its groups of pruning ticks (`processors.pruning_group`,
`processors.pruning`, `state.tick_group`) and its runs of turns
(`state.turn_run`, `state.mention_columns`, `state.adjacency`): loops over
ints, strings and small tuples, which mypyc compiles from the typed source
as it is (docs/performance.md: a forget about an eighth faster). The build
writes the extension modules and a manifest of the sources' digests into
`build/compiled/`, never beside the sources; `emgas._compiled` loads them
only while every source is unchanged, so an edited module runs as written
(all pure) until the next `make install`. Where there is no C compiler or
mypyc, the build says so in one line and the pure modules run: they are
the same code, and what the tests hold both to.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from emgas._compiled import FOLDER, MANIFEST, ROOT, build_tag, current_files, source_digest

# Only modules known to compile as they are and to behave the same
# compiled (tests/unit/project/test_compiled.py); each one's source is its
# path under the checkout (`emgas/state/keys.py`).
MODULES = (
    "emgas.processors.pruning_group", "emgas.processors.pruning", "emgas.state.tick_group", "emgas.state.turn_run",
    "emgas.state.mention_columns", "emgas.state.adjacency", "emgas.state.repository", "emgas.state.keys",
)
# The layers those are in: a build is current while every source in them is.
LAYERS = ("emgas/processors", "emgas/state")
GROUP = "emgas_compiled"  # the build's shared library: GROUP__mypyc
BUILD_TIMEOUT_S = 600

_SETUP = """\
from setuptools import setup
from mypyc.build import mypycify
setup(name="emgas-compiled", version="0", packages=[], py_modules=[],
      ext_modules=mypycify({args!r}, opt_level="3", group_name={group!r}, target_dir={target!r}))
"""


def up_to_date(folder: Path = FOLDER) -> bool:
    """Whether `folder` holds a current build of exactly `MODULES`."""
    return set(current_files(folder)) == set(MODULES) | {f"{GROUP}__mypyc"}


def build(folder: Path = FOLDER) -> None:
    """Compile `MODULES` into `folder` with their manifest (the folder
    replaced whole, so a reader sees the old build or the new one).
    Raises `subprocess.CalledProcessError` or `OSError` where it cannot."""
    sources = _source_digests()  # before: a source edited while it builds must not pass for the one it built from
    with tempfile.TemporaryDirectory(prefix="emgas-mypyc-") as tmp:
        work = Path(tmp)
        args = ["--config-file", str(ROOT / "pyproject.toml"), *(str(ROOT / (name.replace(".", "/") + ".py")) for name in MODULES)]
        (work / "setup.py").write_text(_SETUP.format(args=args, group=GROUP, target=str(work / "c")))
        lib = work / "lib"
        subprocess.run(
            [sys.executable, "setup.py", "build_ext", "--build-lib", str(lib), "--build-temp", str(work / "temp")],
            cwd=work, check=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=BUILD_TIMEOUT_S,
        )
        if _source_digests() != sources:
            raise OSError("a source changed while it was compiled; run it again")
        (lib / MANIFEST).write_text(json.dumps(_manifest(lib, sources), indent=1, sort_keys=True))
        staged = folder.with_name(folder.name + ".new")
        shutil.rmtree(staged, ignore_errors=True)
        shutil.copytree(lib, staged)
        shutil.rmtree(folder, ignore_errors=True)
        os.replace(staged, folder)


def _source_digests() -> dict[str, str]:
    """Every source of the layers the modules are in (`LAYERS`), by path
    under the checkout: compiled code was built against what those said
    (the types it checks of what it imports from them)."""
    sources = sorted(path for layer in LAYERS for path in (ROOT / layer).rglob("*.py"))
    return {str(path.relative_to(ROOT)): source_digest(path) for path in sources}


def _manifest(lib: Path, sources: dict[str, str]) -> dict[str, object]:
    """What `emgas._compiled` checks: the build's tag, each module's file
    (relative to the folder), and the sources' digests (`_source_digests`)."""
    suffix = build_tag()
    modules = {name: name.replace(".", "/") + suffix for name in MODULES}
    modules[f"{GROUP}__mypyc"] = f"{GROUP}__mypyc{suffix}"
    missing = [file for file in modules.values() if not (lib / file).is_file()]
    if missing:
        raise OSError(f"the build made no {', '.join(missing)}")
    return {"tag": suffix, "modules": modules, "sources": sources}


def main() -> int:
    if up_to_date():
        print(f"compiled modules: up to date in {FOLDER.relative_to(ROOT)}")
        return 0
    print(f"compiling {len(MODULES)} modules with mypyc into {FOLDER.relative_to(ROOT)} (about a minute) ...", flush=True)
    try:
        build()
    except subprocess.CalledProcessError as error:
        said = (error.stdout or b"").decode(errors="replace").strip().splitlines()
        errors = [line for line in said if ": error:" in line] or said[-1:] or ["no output"]
        print(f"compiled modules: not built ({errors[0][:300]}); the pure modules run")
    except (OSError, subprocess.TimeoutExpired) as error:
        print(f"compiled modules: not built ({error}); the pure modules run")
    else:
        print(f"compiled modules: built in {FOLDER.relative_to(ROOT)}")
    return 0  # never fails an install: the pure modules are the fallback


if __name__ == "__main__":
    sys.exit(main())
