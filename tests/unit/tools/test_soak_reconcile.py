"""The soak's reconciliation fails when the records do not add up: a turn
dropped, a turn folded twice, a bad record not dead-lettered or dead-lettered
twice, a valid turn dead-lettered, a digest differing, a query hanging. A
clean record set passes; an unacknowledged turn is neither lost nor applied."""

import copy

import pytest

from emgas.tools.soak.faults import KINDS, plan
from emgas.tools.soak.reconcile import ACKED, UNACKED, Attempt, BadRecord, GraphCounts, SoakRecords, reconcile


def clean() -> SoakRecords:
    offered = {"g1": {"t1": ACKED, "t2": ACKED, "t3": UNACKED}, "g2": {"t1": ACKED}}
    return SoakRecords(
        offered=offered,
        graphs={"g1": GraphCounts({"t1", "t2"}, passages=2, turns=2), "g2": GraphCounts({"t1"}, passages=1, turns=1)},
        digest_differences=[],
        bad_sent=[BadRecord("invalid_json", "not_json", 0, 10), BadRecord("oversized", "text_too_long", 1, 4),
                  BadRecord("graph_id_too_long", "invalid_fields", None, None)],
        dead_letters=[(0, 10, "not_json"), (1, 4, "text_too_long")],
        attempts=[Attempt("g1", 1.0, 0.05, "answered"), Attempt("g2", 2.0, 5.0, "timeout"),
                  Attempt("g2", 7.2, 0.1, "refused:partition_moved")],
        query_timeout_s=5.0,
    )


def test_a_clean_record_set_reconciles():
    figures = reconcile(clean())
    assert figures["failures"] == [] and figures["ok"]
    assert (figures["turns_offered"], figures["turns_acknowledged"], figures["turns_applied"]) == (4, 3, 3)
    assert (figures["turns_lost"], figures["turns_applied_twice"], figures["turns_unacknowledged"]) == (0, 0, 1)
    assert (figures["bad_records_sent"], figures["bad_records_dead_lettered"]) == (3, 2)
    assert figures["digests_equal"]


def test_an_unacknowledged_turn_that_landed_is_reported_not_counted():
    records = clean()
    records.graphs["g1"] = GraphCounts({"t1", "t2", "t3"}, passages=3, turns=3)
    figures = reconcile(records)
    assert figures["ok"], figures["failures"]
    assert (figures["turns_applied"], figures["turns_unacknowledged_applied"]) == (3, 1)


def doctored(change) -> dict:  # noqa: ANN001 - a function that spoils a record set
    records = copy.deepcopy(clean())
    change(records)
    return reconcile(records)


def drop_turn(r: SoakRecords) -> None:
    r.graphs["g1"] = GraphCounts({"t1"}, passages=1, turns=1)


def fold_twice(r: SoakRecords) -> None:
    r.graphs["g2"] = GraphCounts({"t1"}, passages=1, turns=2)


def stranger(r: SoakRecords) -> None:
    r.graphs["g2"] = GraphCounts({"t1"}, passages=2, turns=2)


def letter_missing(r: SoakRecords) -> None:
    r.dead_letters.pop()


def letter_twice(r: SoakRecords) -> None:
    r.dead_letters.append((0, 10, "not_json"))


def wrong_reason(r: SoakRecords) -> None:
    r.dead_letters[0] = (0, 10, "invalid_fields")


def valid_refused(r: SoakRecords) -> None:
    r.dead_letters.append((3, 99, "extraction_failed"))


def digest_differs(r: SoakRecords) -> None:
    r.digest_differences.append("g1 v1: live abc, replayed def")


def verify_timed_out(r: SoakRecords) -> None:
    r.verify_error = "no reply to request 1f for partition 0 within 30 s (is a worker running?)"


def query_hangs(r: SoakRecords) -> None:
    r.attempts.append(Attempt("g1", 3.0, 30.0, "timeout"))


def query_unclear(r: SoakRecords) -> None:
    r.attempts.append(Attempt("g1", 3.0, 0.2, "error:KeyError"))


def no_recovery(r: SoakRecords) -> None:
    r.not_recovered.append("worker_sigkill at 30 s")


@pytest.mark.parametrize(("change", "figure", "value", "says"), [
    (drop_turn, "turns_lost", 1, "never applied"),
    (fold_twice, "turns_applied_twice", 1, "applied twice"),
    (stranger, None, None, "never offered"),
    (letter_missing, "bad_records_dead_lettered", 1, "not dead-lettered"),
    (letter_twice, "dead_letters_repeated", 1, "more than once"),
    (wrong_reason, "bad_records_dead_lettered", 1, "dead-lettered as 'invalid_fields'"),
    (valid_refused, "valid_turns_dead_lettered", 1, "not sent as bad"),
    (digest_differs, "digests_equal", False, "differ from the replay"),
    (verify_timed_out, "digests_equal", False, "could not be verified: no reply"),
    (query_hangs, None, None, "past their 5 s timeout"),
    (query_unclear, None, None, "without a reply or a timeout"),
    (no_recovery, None, None, "not recovered"),
])
def test_a_doctored_record_set_fails_with_its_reason(change, figure, value, says):
    figures = doctored(change)
    assert not figures["ok"]
    assert len(figures["failures"]) == 1 and says in figures["failures"][0], figures["failures"]
    if figure is not None:
        assert figures[figure] == value


def test_the_fault_schedule_is_seeded_and_each_round_has_every_kind():
    first = plan(3, duration_s=100, every_s=8, workers=["worker-1", "worker-2"], nodes=3)
    assert first == plan(3, duration_s=100, every_s=8, workers=["worker-1", "worker-2"], nodes=3)
    assert first != plan(4, duration_s=100, every_s=8, workers=["worker-1", "worker-2"], nodes=3)
    assert [f.at_s for f in first] == [8.0 * i for i in range(1, 13)]
    assert sorted(f.kind for f in first[:6]) == sorted(KINDS) == sorted(f.kind for f in first[6:12])
    assert all(10 <= f.stall_s <= 20 and 1 <= f.node <= 3 for f in first)


def test_rss_is_summed_up_per_process_from_its_warm_level():
    from emgas.tools.soak.run import rss_summary

    rss = {"worker-1": [[t, 500.0 + t / 10] for t in range(0, 300, 10)],
           "worker-2": [[0.0, 500.0], [10.0, 510.0], [20.0, 30.0], [40.0, 480.0], [200.0, 520.0], [300.0, 530.0]]}
    summary = rss_summary(rss, starts=[[20.0, "worker-2", 42]])
    one = summary["worker-1"]
    assert (one["first_mib"], one["peak_mib"], one["level_at_2_min_mib"]) == (500.0, 529.0, 512.0)
    assert one["peak_after_2_min_ratio"] == round(529.0 / 512.0, 3)
    two = summary["worker-2"]  # its second process, from 15 s after its start: the 30 MiB of a starting one skipped
    assert (two["from_s"], two["first_mib"], two["peak_mib"]) == (40.0, 480.0, 530.0)
    # A process still starting 15 s in (catching up, loading): from the recovery after its start.
    slow = {"worker-2": [[0.0, 500.0], [20.0, 30.0], [40.0, 280.0], [60.0, 520.0], [200.0, 525.0], [300.0, 530.0]]}
    late = rss_summary(slow, starts=[[20.0, "worker-2", 42]], recoveries=[10.0, 55.0, 250.0])["worker-2"]
    assert (late["from_s"], late["first_mib"], late["peak_mib"]) == (60.0, 520.0, 530.0)
    early = rss_summary(slow, starts=[[20.0, "worker-2", 42]], recoveries=[25.0])["worker-2"]  # recovered before 15 s
    assert early["from_s"] == 40.0
