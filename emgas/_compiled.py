"""Compiled copies of some pure modules, where a checkout built them.

`make install` compiles a few of the fold's modules with mypyc
(`emgas.tools.compiled`) into `build/compiled/` of the checkout, with a
manifest of the sources they were built from: every source of the layers
they are in, as what compiled code knows of the modules it imports (their
types, which it checks) was read from those. Importing `emgas` puts a
finder first on `sys.meta_path` that loads those modules from there, but
only while every one of those sources is as it was built and the build is
this interpreter's: compiled modules call one another directly, so one
stale module among fresh ones would run old code, and a stale build is
left whole for the pure modules. `EMGAS_PURE=1` turns it off. Installed
from the wheel, there is no such folder and nothing changes.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from importlib.machinery import EXTENSION_SUFFIXES, ExtensionFileLoader, ModuleSpec
from pathlib import Path
from types import ModuleType
from typing import Sequence

ROOT = Path(__file__).resolve().parent.parent  # the checkout (in a wheel's install: site-packages)
FOLDER = ROOT / "build" / "compiled"
MANIFEST = "manifest.json"


def source_digest(path: Path) -> str:
    """SHA-256 of a source file's bytes, hex."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def build_tag() -> str:
    """What an extension module is built for: this interpreter's extension suffix."""
    return EXTENSION_SUFFIXES[0]


def current_files(folder: Path = FOLDER, root: Path = ROOT) -> dict[str, Path]:
    """Module name -> its compiled file in `folder`, for every module the
    manifest lists, when all of them are there, built for this interpreter,
    and every source it lists (path under `root` -> SHA-256) is unchanged
    since; else none (an empty dict)."""
    try:
        manifest = json.loads((folder / MANIFEST).read_text())
        if manifest.get("tag") != build_tag():
            return {}
        files = {name: folder / file for name, file in manifest["modules"].items()}
        fresh = all(source_digest(root / path) == digest for path, digest in manifest["sources"].items())
    except (OSError, ValueError, KeyError, TypeError, AttributeError):  # no build, or one this code cannot read: pure
        return {}
    return files if fresh and files and all(path.is_file() for path in files.values()) else {}


class CompiledFinder:
    """Finds the modules of a build (`current_files`) in its folder (a
    meta path finder: `importlib.abc`'s protocol, not its costly import)."""

    def __init__(self, files: dict[str, Path]) -> None:
        self.files = files

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None,
    ) -> ModuleSpec | None:
        file = self.files.get(fullname)
        if file is None:
            return None
        spec = ModuleSpec(fullname, ExtensionFileLoader(fullname, str(file)), origin=str(file))
        spec.has_location = True  # its __file__: the compiled file
        return spec


def install() -> CompiledFinder | None:
    """Put the finder of a current build first on `sys.meta_path` (once);
    None where there is none, or `EMGAS_PURE` is set."""
    if os.environ.get("EMGAS_PURE", "") not in ("", "0"):
        return None
    for finder in sys.meta_path:
        if isinstance(finder, CompiledFinder):
            return finder
    files = current_files()
    if not files:
        return None
    finder = CompiledFinder(files)
    sys.meta_path.insert(0, finder)
    return finder


def compiled(module: ModuleType) -> bool:
    """Whether `module` was loaded from a compiled build."""
    return isinstance(getattr(module, "__loader__", None), ExtensionFileLoader)
