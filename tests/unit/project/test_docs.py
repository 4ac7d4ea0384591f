"""The README and docs/ hold together: links resolve, the README stays short and keeps its two commands."""

import re
from pathlib import Path

import pytest

from tests.support import doc_blocks
from tests.support.doc_blocks import PAGES as DOC_RUN_PAGES

ROOT = Path(__file__).resolve().parents[3]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def _anchors(page: Path) -> set[str]:
    """GitHub's anchors of a page's headings."""
    found = set()
    for heading in re.findall(r"^#+ (.+)$", page.read_text(), re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        found.add(slug)
    return found


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_every_relative_link_resolves_to_a_file_and_heading(page):
    broken = []
    for target in LINK.findall(page.read_text()):
        if re.match(r"[a-z]+:", target):
            continue  # http(s), mailto
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        if not resolved.exists():
            broken.append(target)
        elif anchor and resolved.is_file() and anchor not in _anchors(resolved):
            broken.append(target)
    assert broken == []


def test_the_readme_is_short_and_gives_the_two_commands():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 260
    assert "make demo" in readme and "make test" in readme


def test_every_docs_page_is_in_the_index():
    index = (ROOT / "docs" / "README.md").read_text()
    pages = [p.name for p in (ROOT / "docs").glob("*.md") if p.name != "README.md"]
    assert [p for p in pages if f"({p})" not in index] == []


@pytest.mark.parametrize("page", DOC_RUN_PAGES, ids=[str(p.relative_to(ROOT)) for p in DOC_RUN_PAGES])
def test_each_runnable_block_of_the_run_pages_is_run_or_says_why_not(page):
    found = doc_blocks.blocks(page)  # a misused marker raises
    assert found, f"{page.name} has no sh or python block"
    for block in found:
        assert block.skip is None or len(block.skip) > 10, f"{block.where}: a skip needs its reason"


def test_markers_are_read_with_the_block_they_precede(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("\n".join([
        "<!-- docs-run: expect: one | two -->", "```sh", "echo one two", "```",
        "<!-- docs-run: skip: needs a Docker engine -->", "```python", "import docker", "```",
        "```json", "{}", "```",
        "```sh", "true", "```",
    ]))
    found = [(b.language, b.expect, b.skip, b.code) for b in doc_blocks.blocks(page)]
    assert found == [("sh", ["one", "two"], None, "echo one two\n"), ("python", [], "needs a Docker engine", "import docker\n"),
                     ("sh", [], None, "true\n")]
    page.write_text("<!-- docs-run: expect: x -->\n```json\n{}\n```\n")
    with pytest.raises(doc_blocks.MarkerError):
        doc_blocks.blocks(page)


@pytest.mark.parametrize("output, expect, missing", [
    ("a b c", ["a", "c"], None), ("a b c", ["c", "a"], "a"), ("abc", [], None), ("", ["x"], "x"),
])
def test_expected_texts_are_found_in_order(output, expect, missing):
    assert doc_blocks.unexpected(output, expect) == missing
