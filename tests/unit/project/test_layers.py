"""The import contracts in pyproject.toml hold: layers point down, the core imports no
clients, and inside streams/ the roles point down (cli <- runtime | interfaces <- kafka)."""

import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[3]


def test_lint_imports_keeps_every_contract():
    command = shutil.which("lint-imports") or str(Path(sys.executable).parent / "lint-imports")
    if not Path(command).exists():
        pytest.fail("lint-imports is not installed: `pip install -e '.[test]'` installs import-linter")
    done = subprocess.run([command], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    assert len(contracts) == 3
    assert f"Contracts: {len(contracts)} kept, 0 broken." in done.stdout


def test_test_modules_share_helpers_only_through_tests_support():
    """A helper two test modules need lives in tests/support, not in one of them."""
    imports = re.compile(r"^\s*(?:from|import) tests\.(unit|integration|e2e|contract|browser)\b", re.M)
    offenders = [str(path.relative_to(ROOT)) for path in (ROOT / "tests").rglob("*.py")
                 if "node_modules" not in path.parts and imports.search(path.read_text())]
    assert offenders == []


def test_the_benches_import_each_other_one_way_only():
    """`tools.bench` runs the scaling and replay benches; they take nothing from it (no cycle)."""
    import grimp

    graph = grimp.build_graph("emgas")
    bench = {m for m in graph.modules if m == "emgas.tools.bench" or m.startswith("emgas.tools.bench.")}
    for other in ("emgas.tools.scaling_bench", "emgas.tools.replay_bench"):
        assert [m for m in bench if graph.find_shortest_chain(importer=other, imported=m)] == []


def test_the_rules_do_not_import_the_fold_that_reads_them():
    """The fold reads the rule table; a rule sees the state through `FoldState`
    and imports nothing of `state.projector`, not even for its types."""
    source = (ROOT / "state" / "rules.py").read_text()
    assert not re.search(r"^\s*(?:from|import) emgas\.state\.projector\b", source, re.M)
    assert "TYPE_CHECKING" not in source


def test_the_unit_tests_mirror_the_packages():
    """Each unit test lives in the folder of the layer it tests (`project`: the repository as a whole)."""
    unit = ROOT / "tests" / "unit"
    assert not list(unit.glob("test_*.py")), "a unit test outside a layer's folder"
    assert {p.name for p in unit.iterdir() if p.is_dir() and p.name != "__pycache__"} == {
        "processors", "state", "service", "replay", "streams", "tools", "project",
    }


def test_state_reads_no_environment_clock_or_file_but_its_store():
    """`state/` holds storage and the fold: the lexicons, caches and clocks are the service layer's."""
    reads = re.compile(r"\bos\.environ\b|\bgetenv\(|\bPath\.home\(|\bdatetime\.now\(|\btime\.time\(|(?<![\w.])open\(")
    offenders = [p.name for p in (ROOT / "state").glob("*.py") if reads.search(p.read_text())]
    assert offenders == []


def import_circles(imports: dict[str, set[str]]) -> list[list[str]]:
    """The circles of `imports` (module -> modules it imports): its strongly
    connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for other in imports.get(module, ()):
            if other not in index:
                visit(other)
                low[module] = min(low[module], low[other])
            elif other in stack:
                low[module] = min(low[module], index[other])
        if low[module] == index[module]:
            component = []
            while (other := stack.pop()) != module:
                component.append(other)
            if component:
                circles.append(sorted([module, *component]))

    for module in sorted(imports):
        if module not in index:
            visit(module)
    return circles


def test_import_circles_are_found():
    assert import_circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert import_circles({"a": {"b"}, "b": set()}) == []


def test_no_product_module_imports_itself_back_not_even_for_annotations():
    grimp = pytest.importorskip("grimp")  # import-linter's graph
    graph = grimp.build_graph("emgas")
    product = {m for m in graph.modules if not m.startswith("emgas.tools")}
    imports = {m: graph.find_modules_directly_imported_by(m) & product for m in product}
    assert import_circles(imports) == []
