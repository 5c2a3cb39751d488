"""The state file is checked, private and owned by one service: an empty or corrupt file refuses to open with a line
saying what to do, `--new-state` sets it aside (never deletes it), files are 0600, a second service on the same file
is refused naming the holder, and a write failure at run time makes the store `failing` and logs once a minute."""

from __future__ import annotations

import logging
import os
import random
import shutil
import socket
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from fabricd.service.state import StateError, StateStore, WriteHealth, set_aside

T0 = 1_700_000_000_000_000_000


def _filled(path: Path, tickets: int = 400) -> None:
    s = StateStore(path)
    for i in range(tickets):
        s.tickets.create(f"link_flap:x{i}", "link_flap", "leaf-g0-r0", f"Ethernet{i}/1", "t" * 200, {"n": i}, T0)
    s.close()


def test_an_empty_state_file_is_refused_with_what_to_do(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    path.write_bytes(b"")
    with pytest.raises(StateError) as e:
        StateStore(path)
    msg = str(e.value)
    assert msg.startswith(f"{path}: the state file is empty (0 bytes)")
    assert "restore it from a backup, or start with `fabricd run --new-state`" in msg
    assert "\n" not in msg


def test_garbage_in_the_header_or_the_middle_is_refused(tmp_path: Path) -> None:
    header, middle = tmp_path / "header.db", tmp_path / "middle.db"
    for p in (header, middle):
        _filled(p)
    data = bytearray(header.read_bytes())
    data[0:100] = os.urandom(100)
    header.write_bytes(bytes(data))
    data = bytearray(middle.read_bytes())
    assert len(data) > 16 * 4096
    at = len(data) // 2 // 4096 * 4096  # one whole page in the middle of the tickets table
    data[at : at + 4096] = b"\xff" * 4096
    middle.write_bytes(bytes(data))
    with pytest.raises(StateError, match="not a readable state database") as e:
        StateStore(header)
    assert "--new-state" in str(e.value)
    # SQLite finds the damaged page at open (malformed) or in the quick check, depending on where it is
    with pytest.raises(StateError, match=r"(not a readable state database|failed its integrity check)") as e:
        StateStore(middle)
    assert "--new-state" in str(e.value)


def test_new_state_sets_the_old_file_aside_and_starts_empty(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    _filled(path, tickets=3)
    original = path.read_bytes()
    kept = set_aside(path, now=1_700_000_000)
    assert kept == tmp_path / "state.db.set-aside-20231114T221320Z"
    assert kept.read_bytes() == original and not path.exists()
    s = StateStore(path)
    assert s.tickets.all() == []
    s.close()
    assert set_aside(tmp_path / "none.db") is None


def test_state_files_are_private(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    s = StateStore(path, owner=True)
    s.tickets.create("f", "link_flap", "d", "p", "t", {}, T0)
    for f in (path, tmp_path / "state.db-wal", tmp_path / "state.db.lock"):
        assert stat.S_IMODE(f.stat().st_mode) == 0o600, f
    s.close()
    path.chmod(0o644)  # made by an older fabricd
    StateStore(path).close()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_a_second_service_on_the_same_file_is_refused_naming_the_holder(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    first = StateStore(path, owner=True)
    with pytest.raises(StateError) as e:
        StateStore(path, owner=True)
    msg = str(e.value)
    assert f"in use by another fabricd, pid {os.getpid()} on {socket.gethostname()}" in msg
    assert "PostgreSQL with a leader lease (docs/ha.md)" in msg
    tool = StateStore(path)  # `fabricd token create` beside a running service: SQLite's own locking
    tool.close()
    first.close()
    StateStore(path, owner=True).close()  # released with the store


def test_write_failures_make_the_store_failing_and_log_once_a_minute(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    s = StateStore(tmp_path / "state.db")
    s._db._db.close()  # type: ignore[attr-defined]  # the file went away under us
    caplog.set_level(logging.ERROR, "fabricd.state")
    for _ in range(50):
        with pytest.raises(StateError):
            s.tickets.create("f", "link_flap", "d", "p", "t", {}, T0)
    assert s.writes.failing and s.writes.failures == 50
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1 and "state cannot be written (1 failed writes so far)" in errors[0].getMessage()
    assert "Traceback" not in caplog.text


def test_write_health_recovers() -> None:
    w = WriteHealth()
    w.failed(RuntimeError("disk full"))
    assert w.failing and w.last_error == "disk full"
    w.ok()
    assert not w.failing and w.failures == 1


@pytest.mark.skipif(shutil.which("chattr") is None, reason="needs chattr (e2fsprogs)")
def test_an_immutable_state_file_is_refused_at_start(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    _filled(path, tickets=1)
    if subprocess.run(["chattr", "+i", str(path)], capture_output=True).returncode != 0:
        pytest.skip("this filesystem or container does not allow chattr +i")
    try:
        with pytest.raises(StateError, match="cannot open the state database for writing") as e:
            StateStore(path)
        assert "lsattr: immutable?" in str(e.value)
    finally:
        subprocess.run(["chattr", "-i", str(path)], check=True)


def test_new_state_takes_the_lock_first_and_moves_nothing_under_a_running_service(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    running = StateStore(path, owner=True)
    running.tickets.create("f", "link_flap", "d", "p", "t", {}, T0)
    with pytest.raises(StateError) as e:
        StateStore(path, owner=True, new_state=True, force=True)
    (line,) = str(e.value).splitlines()
    assert line.startswith(f"{path}: in use by another fabricd, pid {os.getpid()}")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.db", "state.db-shm", "state.db-wal", "state.db.lock"]
    running.tickets.create("g", "link_flap", "d", "q", "t", {}, T0)  # still writing into the file at the path
    running.close()
    assert [t.fault for t in StateStore(path).tickets.all()] == ["g", "f"]


def test_new_state_refuses_a_readable_file_unless_forced(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    _filled(path, tickets=3)
    with pytest.raises(StateError) as e:
        StateStore(path, owner=True, new_state=True)
    (line,) = str(e.value).splitlines()
    assert line.startswith(f"{path}: --new-state refused: this state file is readable (3 tickets, 0 actions, 0 tokens)")
    assert "add --force to set it aside anyway" in line
    assert not list(tmp_path.glob("*set-aside*"))
    s = StateStore(path, owner=True, new_state=True, force=True)
    assert s.tickets.all() == [] and s.started_empty and "set aside as" in s.started_empty
    s.close()
    (kept,) = tmp_path.glob("state.db.set-aside-*Z")
    assert len(StateStore(kept).tickets.all()) == 3


def test_new_state_sets_a_damaged_file_aside_without_force(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    _filled(path, tickets=3)
    data = bytearray(path.read_bytes())
    data[0:100] = b"\xa5" * 100
    path.write_bytes(bytes(data))
    s = StateStore(path, owner=True, new_state=True)
    assert s.tickets.all() == []
    s.close()
    (kept,) = tmp_path.glob("state.db.set-aside-*Z")
    assert kept.read_bytes() == bytes(data)


def test_a_missing_state_file_starts_empty_and_says_so(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    s = StateStore(path, owner=True)
    assert s.started_empty == f"no state file at {path} (a first run, or the file was deleted or moved)"
    s.close()
    s = StateStore(path, owner=True)
    assert s.started_empty is None
    s.close()


def test_every_damaged_page_is_refused_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    _filled(path, tickets=150)
    good = path.read_bytes()
    rng = random.Random(39)
    checked = 0
    for page in range(1, min(len(good) // 4096, 12)):
        data = bytearray(good)
        data[page * 4096 : (page + 1) * 4096] = rng.randbytes(4096)
        damaged = tmp_path / f"page{page}.db"
        damaged.write_bytes(bytes(data))
        try:
            StateStore(damaged).close()
        except StateError as e:
            assert "\n" not in str(e) and str(damaged) in str(e), str(e)
            checked += "failed its integrity check (*** in database main ***; Page" in str(e)  # SQLite's lines
    assert checked  # a damage quick_check reports on several lines was among them


@pytest.fixture
def immutable_folder(tmp_path: Path) -> Iterator[Path]:
    folder = tmp_path / "state"
    folder.mkdir()
    _filled(folder / "state.db", tickets=1)
    if shutil.which("chattr") is None or subprocess.run(["chattr", "+i", str(folder)]).returncode != 0:
        pytest.skip("needs chattr +i (e2fsprogs, a filesystem and container that allow it)")
    try:
        yield folder
    finally:
        subprocess.run(["chattr", "-i", str(folder)], check=True)


def test_an_immutable_folder_is_named_as_such(immutable_folder: Path) -> None:
    path = immutable_folder / "state.db"
    for new_state in (False, True):
        with pytest.raises(StateError) as e:
            StateStore(path, owner=True, new_state=new_state, force=True)
        (line,) = str(e.value).splitlines()
        assert line.startswith(f"{path}: its folder {immutable_folder} cannot be written (Operation not permitted)")
        assert "lsattr -d: immutable?" in line and "not a readable state database" not in line
    assert (immutable_folder / "state.db").exists() and not list(immutable_folder.glob("*set-aside*"))


def test_a_schema_with_bytes_that_are_not_text_is_refused_in_one_line(tmp_path: Path) -> None:
    """Found by the property test (test_state_properties.py): SQLite's report on a damaged schema carries the bytes,
    and Python's driver fails to decode the report itself (UnicodeDecodeError, not a sqlite3 error)."""
    path = tmp_path / "state.db"
    _filled(path, tickets=1)
    data = bytearray(path.read_bytes())
    data[data.index(b"CREATE TABLE meta") + 7] = 0x80
    path.write_bytes(bytes(data))
    with pytest.raises(StateError) as e:
        StateStore(path)
    (line,) = str(e.value).splitlines()
    assert line.startswith(f"{path}: not a readable state database ('utf-8' codec can't decode byte 0x80")
    with pytest.raises(StateError, match="--new-state"):
        StateStore(path, owner=True)
    s = StateStore(path, owner=True, new_state=True)  # unreadable: set aside without --force
    assert s.tickets.all() == []
    s.close()


def test_an_error_reading_rows_late_is_a_state_error(tmp_path: Path) -> None:
    s = StateStore(tmp_path / "state.db")
    s.tickets.create("f", "link_flap", "d", "p", "t", {}, T0)
    result = s._db.execute("SELECT * FROM tickets")
    s._db.close()  # the connection gone between the statement and reading its rows
    with pytest.raises(StateError, match="fabricd acts only with its state written"):
        result.fetchall()
