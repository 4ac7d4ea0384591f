"""Everyday questions through the CLI: a conversation of the project's own
(`tests/data/everyday`, English and Chinese) asked in category words,
synonyms and paraphrases ("What pets do I have?" of a greyhound), scored by
`emgas eval locomo` with a floor."""

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.support.wordnet import needs_wordnet

DATA = Path(__file__).resolve().parents[1] / "data" / "everyday"
FLOOR = 0.8  # recall@10 of the default retriever, overall and per language

pytestmark = needs_wordnet


def test_everyday_questions_reach_the_floor(tmp_path):
    out = tmp_path / "figures.json"
    env = {**os.environ, "EMGAS_HOME": str(tmp_path / "home")}
    done = subprocess.run(
        [sys.executable, "-m", "emgas", "eval", "locomo", "--data", str(DATA),
         "--retriever", "emgas", "--retriever", "bm25", "--json", str(out)],
        env=env, capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    figures = json.loads(out.read_text())
    emgas = figures["retrievers"]["emgas"]["all"]
    assert emgas["recall@10"] >= FLOOR, emgas
    per_language = figures["conversations"]["emgas"]["recall@10"]
    assert set(per_language) == {"everyday-en", "everyday-zh", "everyday-family-en", "everyday-family-zh"}
    assert min(per_language.values()) >= FLOOR, per_language
    assert emgas["recall@10"] > figures["retrievers"]["bm25"]["all"]["recall@10"]
