"""The HIL bench's pytest plugin as the package's entry point (pyproject.toml, pytest11) finds it: the plugin
itself (host_bridge.hil.plugin) when the [bench] extra is installed. Without it (a bridge host's base install)
nothing is registered, so that pytest still runs there: the plugin's modules need the bench's packages (paho for
the observer, the MicroPython Unix port for virtual boards)."""

from importlib.util import find_spec

if find_spec("paho") is not None and find_spec("micropython_unix") is not None:
    from host_bridge.hil.plugin import *  # noqa: F403 (its hooks and fixtures, which pytest finds here)
