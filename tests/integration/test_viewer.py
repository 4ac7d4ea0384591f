"""The graph viewer in a real browser: Debian's Chromium driven by playwright-core.

Loads the page a worker serves, picks a graph, asks a query, checks the
passages listed, and keeps a screenshot in test-artifacts/viewer.png.
"""

import json
import shutil
import subprocess
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from emgas.tools.harness import demo_turns
from tests.support.live import serving

pytestmark = pytest.mark.integration
ROOT = Path(__file__).parents[2]
BROWSER = ROOT / "tests" / "browser"
ARTIFACTS = ROOT / "test-artifacts"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"

needs_browser = pytest.mark.skipif(
    not (Path(CHROMIUM).exists() and (BROWSER / "node_modules" / "playwright-core").exists() and shutil.which("node")),
    reason="needs Debian's chromium and `npm ci --prefix tests/browser` (make browser)",
)


def test_viewer_api_serves_graphs_and_traced_queries(tmp_path):
    turns = [t for t in demo_turns() if t.graph_id == "alice"]
    with serving(tmp_path / "api", 1, turns) as (live, port):
        base = f"http://127.0.0.1:{port}"
        graphs = json.loads(urllib.request.urlopen(f"{base}/api/graphs", timeout=5).read())
        assert [g["graph"] for g in graphs] == ["alice"] and graphs[0]["passages"] == len(turns)
        picture = json.loads(urllib.request.urlopen(f"{base}/api/graph?graph=alice&limit=20", timeout=5).read())
        assert len(picture["nodes"]) == 20 and picture["edges"]
        ids = {n["id"] for n in picture["nodes"]}
        assert all(e["source"] in ids and e["target"] in ids for e in picture["edges"])
        query = urllib.parse.quote("Who gave me the sourdough starter?")
        traced = json.loads(urllib.request.urlopen(f"{base}/api/query?graph=alice&q={query}", timeout=5).read())
        assert "sourdough" in traced["seeds"] and traced["iterations"]
        assert traced["iterations"][0]["fired"] and {f["id"] for f in traced["iterations"][0]["fired"]} >= {"sourdough"}
        first = traced["passages"][0]
        assert first["turn_id"] in {"alice-019", "alice-021"} and first["because"]


@needs_browser
def test_viewer_in_chromium(tmp_path):
    turns = [t for t in demo_turns() if t.graph_id == "alice"]
    ARTIFACTS.mkdir(exist_ok=True)
    screenshot = ARTIFACTS / "viewer.png"
    with serving(tmp_path / "browser", 1, turns) as (_, port):
        done = subprocess.run(
            ["node", str(BROWSER / "viewer.mjs"), f"http://127.0.0.1:{port}/viewer", "alice",
             "Who gave me the sourdough starter?", "alice-019", str(screenshot)],
            capture_output=True, text=True, timeout=120, env={"CHROMIUM": CHROMIUM, "PATH": "/usr/bin:/bin"},
        )
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert "alice-019" in result["turns"] and result["iterations"] >= 1 and result["errors"] == []
    assert screenshot.stat().st_size > 10_000
