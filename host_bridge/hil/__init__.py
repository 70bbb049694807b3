"""The hardware-in-the-loop bench: devices under test (virtual and real boards), power switches, the power-cycle
loop, the QoS subscriber and verdicts, and the pytest plugin (host_bridge.hil.plugin) that puts them together."""
