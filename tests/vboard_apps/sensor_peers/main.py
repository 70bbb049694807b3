# Virtual-board test app: a sensor board made of libraries nobody in this project wrote, unmodified, laid out in
# /lib as `mpremote mip install` lays them (fetched from PyPI by host_bridge.vboard.stock): micropython-ahtx0's
# AHT20 driver reads the sensor the bench wires on the I2C bus, and micropython-mqtt's asyncio client
# (mqtt_async) joins the WiFi and publishes `count` readings at QoS 1. Each acknowledged one prints an
# `accepted` line.
import json
import time

import uasyncio as asyncio
from ahtx0 import AHT20
from machine import I2C, Pin
from mqtt_async import MQTTClient, config

with open("/flash/config.json") as f:
    cfg = json.load(f)
sensor = AHT20(I2C(0, scl=Pin(22), sda=Pin(21)))
host, port = cfg["broker"].rsplit(":", 1)
config.server = host
config.port = int(port)
config.ssid = "lab"
config.wifi_pw = ""
config.client_id = cfg["client_id"]


async def main():
    client = MQTTClient(config)
    await client.connect()
    for seq in range(cfg["count"]):
        body = {
            "dev": cfg["client_id"],
            "boot": 1,
            "seq": seq,
            "t": time.ticks_ms(),
            "reading": round(sensor.temperature, 2),
            "humidity": round(sensor.relative_humidity, 1),
        }
        await client.publish(cfg["topic"], json.dumps(body), qos=1)
        print("accepted 1 %d" % seq)
    await client.disconnect()
    print("done")


asyncio.run(main())
