"""The time a question names (`processors.dates`) and the ranking step that
lifts what was said then (`service.retrieval.within`)."""

from datetime import date, datetime

import pytest

from emgas.processors.dates import Window, window
from emgas.service.retrieval import within


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("What did Mel paint in July 2023?", Window(date(2023, 7, 1), date(2023, 7, 31))),
        ("What did Maria donate in December 2023?", Window(date(2023, 12, 1), date(2023, 12, 31))),
        ("What painting did Melanie show on October 13, 2023?", Window(date(2023, 10, 12), date(2023, 10, 14))),
        ("What did Gina find on 1 February, 2023?", Window(date(2023, 1, 31), date(2023, 2, 2))),
        ("What did John do the week before August 3, 2023?", Window(date(2023, 7, 26), date(2023, 8, 4))),
        ("Maria's puppy she got two weeks before August 11, 2023?", Window(date(2023, 7, 27), date(2023, 8, 12))),
        ("Where was John between August 11 and August 15 2023?", Window(date(2023, 8, 10), date(2023, 8, 16))),
        ("When did Melanie go camping in June?", Window(month=6)),
        ("When did Caroline go to the support group?", None),
        ("What may I do about it?", None),  # "may" the verb is no month
        ("Is 31 February, 2023 a day?", Window(date(2023, 2, 1), date(2023, 2, 28))),  # no such day: its month
    ],
)
def test_a_question_names_a_span_of_days_or_a_month(text, expected):
    assert window(text) == expected


def test_a_month_without_a_year_holds_that_month_of_every_year():
    june = Window(month=6)
    assert june.holds(datetime(2022, 6, 30, 23)) and june.holds(datetime(2023, 6, 1))
    assert not june.holds(datetime(2023, 7, 1))


def test_passages_said_within_the_window_are_lifted():
    ranked = [("a", 3.0), ("b", 2.0), ("c", 1.0), ("d", 0.5)]
    times = {"a": datetime(2023, 5, 1), "b": datetime(2023, 7, 2), "c": datetime(2023, 7, 30), "d": datetime(2023, 8, 1)}
    july = Window(date(2023, 7, 1), date(2023, 7, 31))
    assert within(ranked, times, july, 1.0) == [("b", 4.0), ("a", 3.0), ("c", 2.0), ("d", 0.5)]
    assert within(ranked, times, july, 0.0) == ranked
