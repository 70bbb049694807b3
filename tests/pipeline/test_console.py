"""The audit's console table stays readable for a fleet: every device-boot up to a bound, then the worst ones and
the totals (the full table is in the output files)."""

from __future__ import annotations

from typing import Any

from dmqtt_pipeline.audit import AuditResult, format_boots


def boot(dev: str, lost: int = 0, duplicates: int = 0) -> dict[str, Any]:
    return {"dev": dev, "boot": 1, "qos": 1, "received": 100 + duplicates - lost, "highest_seq": 99, "lost": lost,
            "duplicates": duplicates, "out_of_order": 0, "latency_p50_ms": 1.0, "latency_p99_ms": 2.0}  # fmt: skip


def result(boots: list[dict[str, Any]]) -> AuditResult:
    return AuditResult(boots, {}, sum(b["received"] for b in boots), 0, 0, [])


def test_a_small_fleet_is_printed_whole() -> None:
    lines = format_boots(result([boot(f"d{i:02}") for i in range(5)]), limit=20).splitlines()
    assert len(lines) == 6 and lines[0].startswith("device") and [x.split()[0] for x in lines[1:]] == [
        "d00", "d01", "d02", "d03", "d04"
    ]  # fmt: skip


def test_a_fleet_prints_its_worst_device_boots_and_the_totals() -> None:
    boots = [boot(f"d{i:03}") for i in range(1000)]
    boots[700] = boot("d700", lost=5)
    boots[300] = boot("d300", duplicates=3)
    lines = format_boots(result(boots), limit=20).splitlines()
    assert lines[0] == "the 20 worst of 1000 device-boots (all of them: OUT/boots, summary.json)"
    assert len(lines) == 1 + 1 + 20 + 1
    assert [x.split()[0] for x in lines[2:4]] == ["d700", "d300"]  # most lost first, then duplicated
    totals = lines[-1].split()
    assert totals[:3] == ["all", "1000", "device-boots"]
    assert totals[3:] == [str(1000 * 100 - 5 + 3), "5", "3", "0"]
