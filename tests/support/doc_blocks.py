"""The runnable code blocks of the docs, in order, with what each must print.

A fenced block is runnable if its language is `sh` or `python`; an HTML
comment on the line before it says what to check or why not to run it:

    <!-- docs-run: expect: TEXT | TEXT -->   each TEXT appears in its output, in this order
    <!-- docs-run: skip: REASON -->          not run, for REASON (shown by the test)

`tests/e2e/test_docs_run.py` runs them; `tests/unit/project/test_docs.py` checks
the markers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# The pages whose examples run, in the order a reader meets them (README's tour first).
PAGES = [ROOT / "README.md", ROOT / "docs" / "usage.md", ROOT / "docs" / "agents.md"]
RUNNABLE = {"sh", "python"}
FENCE = re.compile(r"^```(\S*)\s*$")
MARKER = re.compile(r"^<!-- docs-run: (\w+): (.*?) -->$")


class MarkerError(ValueError):
    """A docs-run comment that is not one of the two forms, or not before a runnable block."""


@dataclass
class Block:
    page: Path
    line: int  # of the opening fence, 1-based
    language: str
    code: str
    expect: list[str] = field(default_factory=list)
    skip: str | None = None

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def blocks(page: Path) -> list[Block]:
    """The runnable blocks of `page`, with their markers; MarkerError for a marker misused."""
    lines = page.read_text().splitlines()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if not opening:
            if lines[i].startswith("<!-- docs-run"):
                following = lines[i + 1] if i + 1 < len(lines) else ""
                language = FENCE.match(following)
                if not MARKER.match(lines[i]) or not language or language.group(1) not in RUNNABLE:
                    raise MarkerError(f"{page.name}:{i + 1}: a docs-run marker must be `expect: ...` or "
                                      f"`skip: ...`, right before a sh or python block: {lines[i]!r}")
            i += 1
            continue
        end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
        if opening.group(1) in RUNNABLE:
            block = Block(page, i + 1, opening.group(1), "\n".join(lines[i + 1:end]) + "\n")
            marker = MARKER.match(lines[i - 1]) if i else None
            if marker and marker.group(1) == "skip":
                block.skip = marker.group(2).strip()
            elif marker:
                block.expect = [text.strip() for text in marker.group(2).split(" | ")]
            found.append(block)
        i = end + 1
    return found


def unexpected(output: str, expect: list[str]) -> str | None:
    """The first expected text not found in `output` after the previous one (None: all are)."""
    position = 0
    for text in expect:
        found = output.find(text, position)
        if found < 0:
            return text
        position = found + len(text)
    return None
