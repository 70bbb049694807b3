# Freezes the firmware into a MicroPython image (in ports/esp32: make BOARD=ESP32_GENERIC
# FROZEN_MANIFEST=/path/to/firmware/manifest.py). Frozen bytecode runs from flash, so the code that .mpy files
# copied by `host-bridge deploy` take in the heap stays free for data. codec_host.py (the broker's half of the
# codec) and dboard/console_host.py (the host's reader of the console), used by the host, are left out; main.py
# stays a file on the board's filesystem.
include("$(PORT_DIR)/boards/manifest.py")
package(
    "dmqtt",
    files=[
        "__init__.py",
        "errors.py",
        "codec.py",
        "codec_text.py",
        "client_text.py",
        "session.py",
        "inbox.py",
        "journal_record.py",
        "journal.py",
        "wake.py",
        "journal_ring.py",
        "journal_file.py",
        "client.py",
        "usage.py",
        "oversize.py",
        "confirm.py",
        "transport.py",
        "tls.py",
        "wifi.py",
    ],
    opt=3,
)
package(
    "dlink",
    files=[
        "control.py",
        "frame.py",
        "link.py",
        "transport.py",
        "now.py",
        "now_radio.py",
        "now_node.py",
        "now_transport.py",
        "nodes.py",
    ],
    opt=3,
)
package("dboard", files=["console.py"], opt=3)
module("board_app.py", base_path="app", opt=3)
module("board_open.py", base_path="app", opt=3)
module("config.py", base_path="app", opt=3)
module("config_file.py", base_path="app", opt=3)
module("config_text.py", base_path="app", opt=3)
module("realboard.py", base_path="app", opt=3)
module("continuous.py", base_path="app", opt=3)
module("duty.py", base_path="app", opt=3)
module("sampler.py", base_path="app", opt=3)
module("wake_plan.py", base_path="app", opt=3)
module("sensor_hook.py", base_path="app", opt=3)
module("supervise.py", base_path="app", opt=3)
module("tls_open.py", base_path="app", opt=3)
module("gateway.py", base_path="app", opt=3)
module("gateway_config.py", base_path="app", opt=3)
module("node_wake.py", base_path="app", opt=3)
