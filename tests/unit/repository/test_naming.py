"""One word for one thing: the witness and the observer (below); every `host-bridge` subcommand lives in the module
named after it (NAME_command in its subsystem's package, docs/architecture.md), and that module holds the
command's arguments and handler."""

from __future__ import annotations

import importlib
import re
import subprocess
from pathlib import Path

from host_bridge.cli import COMMANDS
from tests.conftest import REPO


def test_every_subcommand_is_in_its_named_module() -> None:
    for name, (module_name, _help) in COMMANDS.items():
        assert module_name.rsplit(".", 1)[1] == f"{name}_command", (name, module_name)
        module = importlib.import_module(module_name)
        assert callable(module.add_arguments) and callable(module.run), module_name


# "Witness" is the board's own account of what it accepted (its `accepted` lines: promises.Witness); the subscriber
# at the broker that records deliveries is the observer (docs/console-protocol.md, "The witness").
OBSERVER_CALLED_WITNESS = re.compile(
    r"witness\s*=\s*(Subscriber|mqtt\.Client|recorder_subscriber)\("
    r"|witness (subscriber|subscribed|at the broker)|arrivals? at the witness|-witness[\"'-]",
    re.IGNORECASE,
)


def test_the_subscriber_at_the_broker_is_the_observer_never_the_witness() -> None:
    # The repository's own files (git's list): not what a test running beside this one writes and removes.
    listed = subprocess.run(["git", "ls-files", "*.py", "*.md"], cwd=REPO, capture_output=True, text=True, check=True)
    said = [
        f"{name}:{n}: {line.strip()}"
        for name in listed.stdout.split()
        if Path(name).name not in ("CHANGELOG.md", "test_naming.py")  # (history; this file's own pattern)
        for n, line in enumerate((REPO / name).read_text(errors="replace").splitlines(), 1)
        if OBSERVER_CALLED_WITNESS.search(line)
    ]
    assert not said, said
