"""A real board's charge, wake by wake, from a current trace: a Nordic Power Profiler Kit II (`pip install
ppk2-api`, the kit powering the board as its source meter) or a Joulescope (`pip install joulescope`, in series
with the board's supply). The trace is cut into wakes where the current rises above AWAKE_UA; a wake whose peak
passes RADIO_MA had its radio on (a sending wake), the others sampled with the radio off. What comes out has the
names of BENCHMARKS.md figure 14's rows (uAh per reading, each kind of wake's time and charge, the sleep between),
so that a board's measurement sits beside the estimate (docs/low-power.md, "Measuring a real board").

The PPK2's protocol as ppk2-api speaks it: 4-byte little-endian samples at 100 kHz, the ADC value in bits 0-13 and
its range in bits 14-16, turned into amperes by the calibration the kit reports (ppk2_api.PPK2_API.get_samples).
tests/integration/ppk2_standin.py is a kit on a pseudo-terminal that plays a trace, as the real-board paths are
tested without a board."""

from __future__ import annotations

import statistics
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from host_bridge.errors import HostBridgeError

PPK2_RATE_HZ = 100_000  # the kit's sample rate, fixed
AWAKE_UA = 1_000.0  # above this the board is awake: deep sleep draws tens of uA, a running ESP32 tens of mA
RADIO_MA = 60.0  # a wake whose peak passes this had its radio on: 95-100 mA receiving, 49 mA the CPU alone
MIN_WAKE_MS = 5.0  # shorter excursions are spikes (a regulator's, the RTC's), not wakes


class ChargeError(HostBridgeError):
    """The current meter could not be opened or read, or the trace holds no wake."""


@dataclass(frozen=True)
class Wake:
    ms: float
    uah: float
    peak_ma: float

    @property
    def kind(self) -> str:
        return "sending" if self.peak_ma >= RADIO_MA else "sampling"


@dataclass(frozen=True)
class Trace:
    wakes: list[Wake]
    seconds: float
    uah: float  # the whole trace's charge, the sleeps' included
    sleep_ua: float  # the mean current between wakes


def split(samples_ua: Iterable[float], rate_hz: float) -> Trace:
    """The wakes of a trace (microamperes, `rate_hz` samples a second), and what it drew in all and asleep."""
    dt_h = 1 / rate_hz / 3600
    wakes: list[Wake] = []
    total = asleep = 0.0
    asleep_n = n = 0
    start = -1
    charge = peak = 0.0
    for n, ua in enumerate(samples_ua, 1):
        total += ua * dt_h
        if ua >= AWAKE_UA:
            if start < 0:
                start, charge, peak = n - 1, 0.0, 0.0
            charge += ua * dt_h
            peak = max(peak, ua)
            continue
        if start >= 0:
            wakes.append(_wake(start, n - 1, charge, peak, rate_hz))
            start = -1
        asleep += ua
        asleep_n += 1
    if start >= 0:
        wakes.append(_wake(start, n, charge, peak, rate_hz))
    return Trace(
        wakes=[w for w in wakes if w.ms >= MIN_WAKE_MS],  # (shorter ones are spikes: their charge counts in all)
        seconds=n / rate_hz,
        uah=total,
        sleep_ua=asleep / asleep_n if asleep_n else 0.0,
    )


def _wake(first: int, end: int, uah: float, peak_ua: float, rate_hz: float) -> Wake:
    return Wake(ms=(end - first) * 1000 / rate_hz, uah=uah, peak_ma=peak_ua / 1000)


def rows(trace: Trace, cell_mah: float) -> dict[str, Any]:
    """Figure 14's row names for what was measured: each reading is a wake (one reading a wake), and the trace's
    charge, sleeps included, shared among them; the life of a `cell_mah` cell at the trace's pace."""
    if not trace.wakes:
        raise ChargeError(
            f"no wake in {trace.seconds:.1f} s of trace (nothing above {AWAKE_UA:g} uA for {MIN_WAKE_MS:g} ms): is the"
            " board powered through the meter, and awake at least once in the capture?"
        )
    out: dict[str, Any] = {"seconds": trace.seconds, "wakes": len(trace.wakes), "sleep_ua": trace.sleep_ua}
    for kind in ("sending", "sampling"):
        these = [w for w in trace.wakes if w.kind == kind]
        out[f"{kind}_wakes"] = len(these)
        out[f"{kind}_wake_ms"] = statistics.median(w.ms for w in these) if these else None
        out[f"{kind}_wake_uah"] = statistics.median(w.uah for w in these) if these else None
    per_reading = trace.uah / len(trace.wakes)
    out["uah_per_reading"] = per_reading
    readings_a_day = len(trace.wakes) / trace.seconds * 86400
    out["life_days"] = cell_mah * 1000 / (per_reading * readings_a_day)
    return out


def ppk2_trace(port: str, mv: int, seconds: float) -> list[float]:
    """`seconds` of the PPK2's samples (microamperes), the kit as the board's source at `mv` millivolts."""
    try:
        from ppk2_api.ppk2_api import PPK2_API
    except ImportError:
        raise ChargeError("the PPK2 needs ppk2-api: pip install ppk2-api") from None
    try:
        kit = PPK2_API(port, timeout=1)
    except OSError as exc:  # (pyserial's SerialException is one)
        raise ChargeError(f"{port}: cannot open it ({exc})") from None
    if not kit.get_modifiers():  # its calibration: none is a port that is not a PPK2
        raise ChargeError(f"{port}: no calibration came back: is it a Power Profiler Kit II?")
    kit.use_source_meter()
    kit.set_source_voltage(mv)
    kit.toggle_DUT_power("ON")
    kit.start_measuring()
    want = int(seconds * PPK2_RATE_HZ)
    samples: list[float] = []
    deadline = time.monotonic() + seconds + 10
    try:
        while len(samples) < want:
            if time.monotonic() > deadline:
                raise ChargeError(f"{port}: {len(samples)} of {want} samples within {seconds + 10:.0f} s")
            data = kit.get_data()
            if data:
                got, _digital = kit.get_samples(data)
                samples.extend(got)
            else:
                time.sleep(0.01)
    finally:
        kit.stop_measuring()
    return samples[:want]


def joulescope_trace(seconds: float) -> tuple[list[float], float]:
    """`seconds` of a Joulescope's current (microamperes), and its sample rate."""
    try:
        import joulescope
    except ImportError:
        raise ChargeError("the Joulescope needs its package: pip install joulescope") from None
    try:
        with joulescope.scan_require_one(config="auto") as device:
            data = device.read(contiguous_duration=seconds, out_format="samples_get")
            rate = float(device.sampling_frequency)
    except (OSError, RuntimeError, ValueError) as exc:  # no device (RuntimeError), or a read that failed
        raise ChargeError(f"the Joulescope could not be read ({exc})") from None
    current = data["signals"]["current"]["value"]
    return [float(a) * 1e6 for a in current], rate
