"""The benchmarks' own programs run on the tree they are staged in: figure 1's client CPU run (tools/bench_apps/
clients/cpu.py) on the Unix port, with a few messages. A change to the staged layout (dmqtt no longer laid out
beside a folder without board_app.py) once broke the figure with no test noticing; `make bench` is not run by CI."""

from __future__ import annotations

import bench_clients

from host_bridge.boards.firmware_build import stage_firmware


def test_the_client_cpu_program_runs_on_its_staged_tree() -> None:
    tree = stage_firmware(bench_clients.APP, board_packages=True)
    args = ["-X", "heapsize=4M", str(bench_clients.APP / "cpu.py"), "20"]
    got = bench_clients.micropython_json(args, str(tree), "the client CPU run", 120)
    assert got["ref_us"] > 0 and {"qos 1, loop", "qos 2, burst"} <= set(got), got
    assert all(us > 0 for us in got.values()), got
