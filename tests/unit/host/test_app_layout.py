"""An application's files as a board gets them: packages in folders (as mip lays them out), --put paths with
folders, and the folders a real-board deploy makes for them."""

from __future__ import annotations

from pathlib import Path

import pytest

from host_bridge.boards.firmware_build import FirmwareBuildError, app_sources, import_name, parse_put
from host_bridge.boards.realboard import deploy_commands


def test_put_takes_a_path_in_the_board_filesystem(tmp_path: Path) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_text("x")
    assert parse_put(str(ca)) == (ca, "ca.pem")
    assert parse_put(f"{ca}:certs/ca.pem") == (ca, "certs/ca.pem")
    assert parse_put(f"{ca}:/lib/pkg//mod.py") == (ca, "lib/pkg/mod.py")
    for bad in ("../ca.pem", "certs/../../ca.pem", "./x", "/"):
        with pytest.raises(FirmwareBuildError, match="without . or .."):
            parse_put(f"{ca}:{bad}")


def test_a_package_is_imported_by_its_folder_name() -> None:
    assert import_name(Path("lib/mqtt_as/__init__.py")) == "mqtt_as"
    assert import_name(Path("lib/mqtt_as/mqtt_local.py")) == "mqtt_as.mqtt_local"
    assert import_name(Path("dmqtt/session.py")) == "dmqtt.session"
    assert import_name(Path("lib/umqtt/simple.py")) == "umqtt.simple"
    assert import_name(Path("sampler.py")) == "sampler"


def test_an_application_folder_keeps_its_packages_and_skips_caches(tmp_path: Path) -> None:
    for rel in ("main.py", "lib/pkg/__init__.py", "lib/pkg/mod.py", "lib/pkg/__pycache__/mod.py", ".git/hook.py"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("")
    found = [str(p.relative_to(tmp_path)) for p in app_sources(tmp_path)]
    assert found == ["lib/pkg/__init__.py", "lib/pkg/mod.py", "main.py"]


def test_a_deploy_makes_every_folder_its_files_go_in_parents_first(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "lib" / "pkg").mkdir(parents=True)
    (root / "lib" / "pkg" / "mod.mpy").write_bytes(b"M")
    (root / "main.py").write_text("")
    note = tmp_path / "note.txt"
    note.write_text("n")
    cmd = deploy_commands("/dev/ttyACM0", root, None, False, False, [(note, "data/notes/note.txt")])
    text = " ".join(cmd)
    assert "['data', 'data/notes', 'lib', 'lib/pkg']" in text, text
    assert f"fs cp {note} :data/notes/note.txt" in text
    assert text.index("os.mkdir") < text.index(":data/notes/note.txt")
