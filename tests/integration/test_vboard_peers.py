"""Firmware nobody in this project wrote, unmodified, on the virtual board, fetched from PyPI at set-up (`make
stock`): the stock image's umqtt.robust through an access point outage, every QoS 1 message at the broker; and a
sensor board of published libraries in /lib, micropython-ahtx0's AHT20 driver on the modelled I2C sensor and
micropython-mqtt's asyncio client, its readings those the bench set."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from host_bridge.broker.mosquitto import Mosquitto
from host_bridge.hil.subscriber import Subscriber
from host_bridge.vboard import stock
from host_bridge.vboard.runner import VirtualBoard
from host_bridge.vboard.wifi import AccessPoint, JoinModel, Outage
from tests.conftest import APPS


def test_umqtt_robust_rides_out_an_access_point_outage_and_loses_no_qos1_message(
    tmp_path: Path, broker: Mosquitto
) -> None:
    """The access point goes down after the 10th acknowledged message, for a second, within the beacon timeout:
    what the board sends meanwhile waits in the air, and goes when the access point is back. umqtt.simple imports
    `usocket`, so its connection goes through the access point only if that name is the WiFi's socket, as on a
    chip (it was the host's own socket, and no outage reached it). Every one of the 40 messages reaches the
    broker, on the one connection."""
    assert stock.fetched() is not None, "the stock modules were not fetched: run `make stock`"
    dev = "robust-peer"
    topic = f"sensors/{dev}/telemetry"
    subscriber = Subscriber(broker.address, f"{dev}-observer", topic)
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"client_id": dev, "broker": broker.address, "topic": topic, "count": 40}))
    model = JoinModel(scale=0.05, beacon_ms=3000)
    with AccessPoint(tmp_path / "ap", model=model, outages=[Outage.parse("accepted#10:1")]) as ap:
        board = VirtualBoard(
            tmp_path / "b.flash", app=APPS / "robust", config=config, ap=ap, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )  # fmt: skip
        try:
            board.start()
            out = board.output(120)
            status = board.wait()
        finally:
            board.close()
        stats = ap.stats
    try:
        assert status == 0 and "done" in out, out[-3000:]
        assert stats.event_outages == 1 and stats.relayed == 1 and stats.stations_lost == 0, stats
        assert "mqtt" not in out, out[-3000:]  # (robust's DEBUG lines: no error, no reconnect)
        subscriber.wait_for(dev, 40, timeout=30)
        assert subscriber.distinct(dev) == {(1, seq) for seq in range(40)}, out[-3000:]
    finally:
        subscriber.close()


def test_a_published_sensor_driver_and_asyncio_client_report_what_the_bench_sets(
    tmp_path: Path, broker: Mosquitto
) -> None:
    """The AHT20 the bench wires at 0x38 reads 23.4 C and 56.7 %; micropython-ahtx0 initialises it, triggers and
    reads its measurements, and mqtt_async (uasyncio: a non-blocking connect through the access point) publishes
    them at QoS 1. Every message arrives, each with the bench's readings to the driver's resolution."""
    peers = stock.peers()
    assert peers is not None, "the peers were not fetched: run `make stock`"
    dev = "aht-peer"
    topic = f"sensors/{dev}/telemetry"
    observer = Subscriber(broker.address, f"{dev}-observer", topic)
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"client_id": dev, "broker": broker.address, "topic": topic, "count": 12}))
    with AccessPoint(tmp_path / "ap", model=JoinModel(scale=0.05)) as ap:
        board = VirtualBoard(
            tmp_path / "b.flash", app=APPS / "sensor_peers", config=config, ap=ap, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            put=tuple((peers / name, f"lib/{name}") for name in ("ahtx0.mpy", "mqtt_async.mpy")),
        )  # fmt: skip
        try:
            board.drive(i2c={0x38: {"model": "aht20", "temperature_c": 23.4, "humidity": 56.7}})
            board.start()
            out = board.output(120)
            status = board.wait()
        finally:
            board.close()
    try:
        assert status == 0 and "done" in out, out[-3000:]
        observer.wait_for(dev, 12, timeout=30)
        assert observer.distinct(dev) == {(1, seq) for seq in range(12)}, out[-3000:]
        bodies = [json.loads(r.payload) for r in observer.records if r.topic == topic]
        assert {(b["reading"], b["humidity"]) for b in bodies} == {(23.4, 56.7)}, bodies
    finally:
        observer.close()


def test_published_sensor_and_display_drivers_read_and_draw_what_the_bench_sets(tmp_path: Path) -> None:
    """micropython-bme280 reads the BME280 the bench wires at 0x76 (21.5 C, 1009.3 hPa, 47.2 %): its trimming
    parameters, a forced measurement, the datasheet's compensation. micropython-ssd1306 initialises the SSD1306 at
    0x3C and shows a frame: the host reads it back pixel for pixel, upright as the driver's segment remap and COM
    scan put it, and as a PNG."""
    peers = stock.peers()
    assert peers is not None, "the peers were not fetched: run `make stock`"
    board = VirtualBoard(
        tmp_path / "b.flash", app=APPS / "display_peer", stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        put=tuple((peers / name, f"lib/{name}") for name in ("bme280.mpy", "ssd1306.mpy")),
    )  # fmt: skip
    try:
        weather = {"model": "bme280", "temperature_c": 21.5, "pressure_hpa": 1009.3, "humidity": 47.2}
        board.drive(i2c={0x3C: {"model": "ssd1306"}, 0x76: weather})
        board.start()
        out = board.output(60)
        assert board.wait() == 0 and "drawn" in out, out
        rows = board.display(0x3C)
        png = board.display_png(tmp_path / "display.png", 0x3C, scale=2).read_bytes()
    finally:
        board.close()
    assert "scan ['0x3c', '0x76']" in out and "bme280 " in out, out
    # The raw values and trimming parameters the driver read, through the datasheet's compensation (section 4.2.3),
    # are what the bench set. (The driver's own temperature reads low: micropython-bme280 2.1.3 shifts dig_T2 right
    # by 11 before it multiplies, where the datasheet shifts the product, as it would with a chip's values.)
    raw = [int(v) for v in out.split("raw ", 1)[1].split()[:3]]
    trim = [int(v) for v in out.split("trim ", 1)[1].split()[:18]]
    celsius, hpa, percent = bme280_compensation(raw, trim)
    assert (celsius, round(hpa, 1), round(percent, 1)) == (21.5, 1009.3, 47.2), (celsius, hpa, percent)
    assert len(rows) == 64 and all(len(row) == 128 for row in rows), len(rows)
    assert all(rows[y][x] for y in range(8) for x in range(16)), "the block is not lit"
    assert not rows[8][0] and not rows[0][16], "the block spills over"
    assert rows[63][127] and not rows[63][126], "the corner pixel is not where it was drawn"
    text = sum(rows[y][x] for y in range(28, 36) for x in range(40, 100))
    assert 40 < text < 250, text  # the reading's characters' lit pixels, in their box
    assert sum(map(sum, rows)) == 16 * 8 + 1 + text, "pixels lit outside what was drawn"
    assert png.startswith(b"\x89PNG") and len(png) > 100, png[:16]


def bme280_compensation(raw: list[int], trim: list[int]) -> tuple[float, float, float]:
    """Bosch's BME280 datasheet compensation (section 4.2.3, the integer formulas): (C, hPa, %RH) from the raw
    temperature, pressure and humidity and the 18 trimming parameters (T1 to T3, P1 to P9, H1 to H6)."""
    adc_t, adc_p, adc_h = raw
    t1, t2, t3, p1, p2, p3, p4, p5, p6, p7, p8, p9, h1, h2, h3, h4, h5, h6 = trim
    t_fine = ((((adc_t >> 3) - (t1 << 1)) * t2) >> 11) + (((((adc_t >> 4) - t1) ** 2 >> 12) * t3) >> 14)
    celsius = ((t_fine * 5 + 128) >> 8) / 100
    v1 = t_fine - 128000
    v2 = v1 * v1 * p6 + ((v1 * p5) << 17) + (p4 << 35)
    v1 = (((1 << 47) + ((v1 * v1 * p3) >> 8) + ((v1 * p2) << 12)) * p1) >> 33
    p = (((1048576 - adc_p) << 31) - v2) * 3125 // v1
    pascal_256 = ((p + ((p9 * (p >> 13) * (p >> 13)) >> 25) + ((p8 * p) >> 19)) >> 8) + (p7 << 4)
    x = t_fine - 76800
    x = ((((adc_h << 14) - (h4 << 20) - h5 * x) + 16384) >> 15) * (
        ((((((x * h6) >> 10) * (((x * h3) >> 11) + 32768)) >> 10) + 2097152) * h2 + 8192) >> 14
    )
    x -= ((((x >> 15) * (x >> 15)) >> 7) * h1) >> 4
    return celsius, pascal_256 / 256 / 100, (min(max(x, 0), 419430400) >> 12) / 1024
