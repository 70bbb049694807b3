# The durable MQTT client for MicroPython (docs/client.md). The project's one version: the host package's
# (pyproject.toml reads it from here), the board's boot line and summary, `host-bridge --version`. CHANGELOG.md
# says what each version changed for users, the flash and wire formats included.
__version__ = "0.15.0"
