"""Tests that read WordNet: they skip with a clear message where it is not
installed, except under CI, which installs it (`make wordnet`) and must
not pass by skipping them."""

from __future__ import annotations

import os

import pytest

from emgas.service.wordnet import find_dir

WORDNET_DIR = find_dir(os.environ.get("EMGAS_WORDNET_DIR"))

needs_wordnet = pytest.mark.skipif(
    WORDNET_DIR is None and not os.environ.get("CI"), reason="no WordNet: make wordnet (CI installs it)"
)
