"""The promises, defined once (dmqtt_telemetry.promises) for the bench's verdicts and the Spark audit:
counting rules on hand-made deliveries, and the verdict each QoS gets."""

from __future__ import annotations

from dmqtt_telemetry.promises import Delivery, Expectation, Witness, boot_rows, duplicates, judge, lost


def deliveries(dev: str, qos: int, boot: int, seqs: list[int]) -> list[Delivery]:
    return [Delivery(dev, boot, s, qos) for s in seqs]


def test_counting_rules_per_boot() -> None:
    rows = boot_rows(deliveries("a", 1, 1, [0, 1, 1, 3, 5, 5, 5]) + deliveries("a", 1, 2, [0, 1]))
    first, second = rows
    assert (first["boot"], first["received"], first["distinct"], first["highest_seq"]) == (1, 7, 4, 5)
    assert (first["lost"], first["duplicates"], first["missing_ranges"]) == (2, 3, [(2, 2), (4, 4)])
    assert (second["lost"], second["duplicates"]) == (0, 0)
    assert lost(5, 4) == 2 and duplicates(7, 4) == 3  # the same arithmetic Spark applies to columns


def test_verdicts_qos0_may_lose_qos1_must_not_lose_qos2_must_not_duplicate() -> None:
    rows = boot_rows(
        deliveries("q0", 0, 1, [0, 2])  # lost 1: allowed
        + deliveries("q1", 1, 1, [0, 1, 1, 2])  # a duplicate: allowed
        + deliveries("q2", 2, 1, [0, 1, 1, 2])  # a duplicate: broken
    )
    verdicts, _ = judge(rows, None)
    assert (verdicts[0].ok, verdicts[1].ok, verdicts[2].ok) == (True, True, False)
    assert verdicts[2].problems == ["q2 boot 1: 1 delivered twice"]
    verdicts, _ = judge(boot_rows(deliveries("q1", 1, 1, [0, 2])), None)
    assert not verdicts[1].ok and verdicts[1].problems == ["q1 boot 1: 1 lost (seq 1)"]


def test_a_lost_tail_is_caught_only_with_the_accepted_total() -> None:
    rows = boot_rows(deliveries("t", 2, 1, [0, 1, 2]))
    verdicts, _ = judge(rows, None)
    assert verdicts[2].ok  # seq numbers alone cannot show that 3 and 4 were accepted
    verdicts, checks = judge(rows, {"t": Expectation(5, 2), "ghost": Expectation(2, 1)})
    assert not verdicts[2].ok and verdicts[2].lost == 2
    assert checks[1] == {"dev": "t", "qos": 2, "expected": 5, "witnessed": 0, "accounted": 3, "lost_tail": 2}
    assert checks[0]["lost_tail"] == 2 and not verdicts[1].ok  # nothing of "ghost" arrived


def test_the_witness_catches_a_tail_the_total_hides() -> None:
    """Boot 1 delivers seq 0-9 but accepted seq 10 too, which its journal lost in a power cut (taking its count
    with it: the run republished it in boot 2); boot 2 delivers 0-9. The total (20) is accounted for, so judged by
    the total the run passes; judged by what the board said it accepted, seq 10 of boot 1 is lost."""
    rows = boot_rows(deliveries("w", 2, 1, list(range(10))) + deliveries("w", 2, 2, list(range(10))))
    by_total, _ = judge(rows, {"w": Expectation(20, 2)})
    assert by_total[2].ok
    by_witness, checks = judge(rows, {"w": Expectation(20, 2, Witness.upto({1: 10, 2: 9}))})
    assert not by_witness[2].ok and by_witness[2].lost == 1 and checks[0]["lost_tail"] == 1
    assert by_witness[2].problems == [
        "w boot 1: 1 accepted and never arrived (seq 10: the board said it accepted them)"
    ]
    # A boot whose accepted messages never arrived at all, and one fully delivered.
    rows = boot_rows(deliveries("w", 1, 2, list(range(5))))
    verdicts, _ = judge(rows, {"w": Expectation(8, 1, Witness.upto({1: 2, 2: 4}))})
    assert verdicts[1].lost == 3 and verdicts[1].problems == [
        "w boot 1: 3 accepted and never arrived (seq 0-2: the board said it accepted them)"
    ]


def test_each_boot_is_judged_by_the_larger_of_the_witness_and_the_summary_and_their_disagreement_is_said() -> None:
    """A real board's console can lose lines (its USB port drops in a power cycle): the witness then says less
    than the board accepted. The summary's last boot and the run's total still count, and the verdict names the
    disagreement instead of trusting either side silently."""
    rows = boot_rows(deliveries("r", 1, 1, list(range(5))) + deliveries("r", 1, 2, [0, 1]))
    # The console lost boot 1's line for seq 2 and boot 2's last two lines; the summary (boot 2, 4 accepted) and
    # the total (9) say more. Boot 2's seq 2 and 3 never arrived: lost, by the summary's count.
    seen = Witness({1: [0, 1, 3, 4], 2: [0, 1]})
    verdicts, checks = judge(rows, {"r": Expectation(9, 1, seen, final=(2, 4))})
    assert not verdicts[1].ok and verdicts[1].lost == 2
    assert checks[0]["witnessed"] == 9 and checks[0]["lost_tail"] == 2
    problems = verdicts[1].problems
    assert "witness: r boot 1: no accepted line for seq 2 (console lines lost)" in problems
    assert "witness: r boot 2: its summary says it accepted 4, its console shows 2 (console lines lost)" in problems
    assert "r boot 2: 2 accepted and never arrived (seq 2-3: the board said it accepted them)" in problems


def test_a_total_beyond_what_the_witness_accounts_for_is_lost_and_said() -> None:
    """The console shows boot 1's seq 0-2, the total says 5: two accepted messages are unaccounted for by both
    the console and what arrived. Lost (the larger of the two), and the witness's shortfall said."""
    rows = boot_rows(deliveries("s", 2, 1, [0, 1, 2]))
    verdicts, checks = judge(rows, {"s": Expectation(5, 2, Witness.upto({1: 2}))})
    assert verdicts[2].lost == 2 and checks[0]["lost_tail"] == 2
    said = "witness: s: its summary's total is 5, its console accounts for 3 (console lines lost)"
    assert said in verdicts[2].problems
