"""One word for one thing: every `host-bridge` subcommand lives in the module named after it (NAME_command in its
subsystem's package, docs/architecture.md), and that module holds the command's arguments and handler."""

from __future__ import annotations

import importlib

from host_bridge.cli import COMMANDS


def test_every_subcommand_is_in_its_named_module() -> None:
    for name, (module_name, _help) in COMMANDS.items():
        assert module_name.rsplit(".", 1)[1] == f"{name}_command", (name, module_name)
        module = importlib.import_module(module_name)
        assert callable(module.add_arguments) and callable(module.run), module_name
