"""The time a question names: "in July 2023", "on 7 July, 2023", "the week
before August 3, 2023", "between August 11 and August 15 2023", "in June".

A question that names its time ("What did Maria donate in December 2023?",
"What movie did Joanna watch on 1 May, 2022?") is answered by what was said
then; its words alone often share nothing with the answer but the person's
name, a hub (`emgas eval locomo --misses`: most of LoCoMo's missed temporal
and single-hop turns). `window` reads that time as a span of days (or a
month of any year, when no year is given), and the ranking lifts the
passages said within it (`service.retrieval`). English month names only;
pure: no clock is read, a text without a date gives None.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, timedelta

MONTHS = {m: i for i, m in enumerate(
    ("january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
     "november", "december"), start=1)}
_MONTH = r"(january|february|march|april|may|june|july|august|september|october|november|december)"
_DAY = r"(\d{1,2})(?:st|nd|rd|th)?"
_YEAR = r"(\d{4})"
# "7 July, 2023", "July 7, 2023", "July 7 2023" (a day needs its year: "May 3" alone could be any year's)
_DAY_FIRST = re.compile(rf"\b{_DAY} {_MONTH},? {_YEAR}\b", re.IGNORECASE)
_MONTH_FIRST = re.compile(rf"\b{_MONTH} {_DAY},? {_YEAR}\b", re.IGNORECASE)
_MONTH_YEAR = re.compile(rf"\b{_MONTH},? {_YEAR}\b", re.IGNORECASE)
# "in June", "during March": a month without a year ("may" needs "in"/"during"/"of": it is also a verb)
_MONTH_ALONE = re.compile(rf"\b(?:in|during|of|since|by) (?:early |late |mid-?)?{_MONTH}\b(?! \d)", re.IGNORECASE)
_BEFORE = re.compile(r"\b(?:(two|three|2|3) weeks?|(?:the |last )?(?:week|weekend)|(?:a |the )?few days)\s+before\s*$",
                     re.IGNORECASE)
DAY_SLACK = timedelta(days=1)  # a day's passages, and those of the day beside it (time zones, late sessions)


@dataclass(frozen=True)
class Window:
    """Days from `start` to `end` inclusive, or, with `month` and no start, that month of any year."""

    start: date | None = None
    end: date | None = None
    month: int | None = None

    def holds(self, at: datetime) -> bool:
        day = at.date()
        if self.start is not None and self.end is not None:
            return self.start <= day <= self.end
        return self.month == day.month


def window(text: str) -> Window | None:
    """The span of time `text` names, or None: "between" two days spans
    from the first to the second; else days are read first (two or more:
    from the first to the last; one after "the week before", "two weeks
    before" or "a few days before": back that far, the day itself
    included), then a month with its year, then a month alone."""
    said = [(m.start(), _day(int(m.group(3)), m.group(2), int(m.group(1)))) for m in _DAY_FIRST.finditer(text)]
    said += [(m.start(), _day(int(m.group(3)), m.group(1), int(m.group(2)))) for m in _MONTH_FIRST.finditer(text)]
    days: list[tuple[int, date]] = sorted((at, d) for at, d in said if d is not None)
    between = _between(text)
    if between is not None:
        return between
    if len(days) >= 2:
        first, last = min(d for _, d in days), max(d for _, d in days)
        return Window(first - DAY_SLACK, last + DAY_SLACK)
    if days:
        start, day = days[0]
        before = _BEFORE.search(text[:start])
        if before is not None:
            weeks = {"two": 2, "2": 2, "three": 3, "3": 3}.get((before.group(1) or "").lower(), 1)
            return Window(day - timedelta(weeks=weeks) - DAY_SLACK, day + DAY_SLACK)
        return Window(day - DAY_SLACK, day + DAY_SLACK)
    found = _MONTH_YEAR.search(text)
    if found is not None:
        month, year = MONTHS[found.group(1).lower()], int(found.group(2))
        first = date(year, month, 1)
        return Window(first, (first + timedelta(days=32)).replace(day=1) - timedelta(days=1))
    alone = _MONTH_ALONE.search(text)
    return Window(month=MONTHS[alone.group(1).lower()]) if alone is not None else None


_BETWEEN = re.compile(rf"\bbetween {_MONTH} {_DAY} and (?:{_MONTH} )?{_DAY},? {_YEAR}\b", re.IGNORECASE)


def _between(text: str) -> Window | None:
    """"between August 11 and August 15 2023" (the year said once, at the end)."""
    m = _BETWEEN.search(text)
    if m is None:
        return None
    year = int(m.group(5))
    first = _day(year, m.group(1), int(m.group(2)))
    last = _day(year, m.group(3) or m.group(1), int(m.group(4)))
    if first is None or last is None:
        return None
    return Window(min(first, last) - DAY_SLACK, max(first, last) + DAY_SLACK)


def _day(year: int, month: str, day: int) -> date | None:
    try:
        return date(year, MONTHS[month.lower()], day)
    except ValueError:
        return None
