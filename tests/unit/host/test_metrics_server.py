"""/metrics of the long-running commands: the commands' own families, the build's version and the process's
(process_* from /proc), on one page."""

from __future__ import annotations

import urllib.request

from dmqtt import __version__
from host_bridge.metrics import MetricsServer, gauge


def test_the_page_has_the_build_info_and_the_process_beside_the_commands_own() -> None:
    server = MetricsServer("127.0.0.1:0", lambda: [gauge("dmqtt_test_boards", "boards", value=3)], lambda: (True, "ok"))
    server.start()
    try:
        with urllib.request.urlopen(f"http://{server.address}/metrics", timeout=10) as response:
            page = response.read().decode()
    finally:
        server.stop()
    lines = page.splitlines()
    assert "dmqtt_test_boards 3.0" in lines
    assert any(line.startswith('dmqtt_build_info{python="') and f'version="{__version__}"' in line for line in lines)
    for name in ("process_cpu_seconds_total", "process_resident_memory_bytes", "process_start_time_seconds"):
        assert any(line.startswith(name + " ") for line in lines), name
