"""`fabricd lab up --daemons real` on small-sonic: up and converged (every BGP session Established, every LLDP
neighbour known) within 30 s; `lab down` leaves no namespace, veth or daemon; after a kill -9 of the twin, `lab up`
cleans what the dead one left (and so does `lab down`). Real processes, real namespaces."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lab.daemons import tag_of
from tests.conftest import EXAMPLES, REPO

from .real_daemons import SKIP_REAL

pytestmark = [pytest.mark.slow, pytest.mark.daemons, SKIP_REAL]


def lab(state: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "fabricd", "lab", *args, "--state-dir", str(state)], cwd=REPO,
                          capture_output=True, text=True, timeout=150)  # fmt: skip


def left(state: Path) -> tuple[list[str], list[str], list[int]]:
    """This state dir's namespaces, root-namespace veths and the processes running in those namespaces."""
    tag = tag_of(state)
    ns = [n.split()[0] for n in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
          .splitlines() if n.startswith(f"fd{tag}-")]  # fmt: skip
    links = re.findall(rf"^\d+: (f{tag}\w+)", subprocess.run(["ip", "-o", "link"], capture_output=True,
                                                              text=True).stdout, re.MULTILINE)  # fmt: skip
    pids = [int(p) for n in ns for p in subprocess.run(["ip", "netns", "pids", n], capture_output=True,
                                                        text=True).stdout.split()]  # fmt: skip
    return ns, links, pids


def alive(pids: list[int], within_s: float = 5.0) -> list[int]:
    """The processes of `pids` still running (not zombies) after up to `within_s` for them to end."""

    def running(pid: int) -> bool:
        try:
            return Path(f"/proc/{pid}/stat").read_text().split(") ")[-1][:1] not in ("Z", "X")
        except OSError:
            return False

    deadline = time.monotonic() + within_s
    while (got := [p for p in pids if running(p)]) and time.monotonic() < deadline:
        time.sleep(0.1)
    return got


def test_up_converges_within_30_s_and_nothing_is_left_even_after_a_kill_9(tmp_path: Path) -> None:
    state = tmp_path / "lab"
    spec = str(EXAMPLES / "small-sonic.yaml")
    offset = str(20000 + os.getpid() % 20000)
    start = ["up", "--spec", spec, "--daemons", "real", "--base-address", "127.44.0.1", "--port-offset", offset]
    r = lab(state, *start)
    try:
        assert r.returncode == 0, r.stderr
        m = re.search(r"real daemons converged in ([\d.]+) s \(16/16 BGP sessions Established, 24/24 LLDP", r.stdout)
        assert m is not None, r.stdout
        assert float(m.group(1)) < 30
        ns, _, first = left(state)
        assert len(ns) == 12  # 8 switches and 4 servers
        assert len(first) >= 8 * 2 + 12  # zebra and bgpd per switch, lldpd everywhere

        os.kill(int((state / "twin.pid").read_text()), signal.SIGKILL)  # the twin dies; its daemons do not
        time.sleep(0.5)
        assert alive(first, 0)
        r = lab(state, *start)  # cleans what the dead twin left, then starts afresh
        assert r.returncode == 0 and "converged" in r.stdout, r.stderr
        assert alive(first) == [] and len(left(state)[0]) == 12
        second = left(state)[2]
    finally:
        down = lab(state, "down")
    assert down.returncode == 0, down.stderr
    assert left(state) == ([], [], []) and alive(second) == []

    # a twin killed with -9, then `lab down`: what it left goes too
    r = lab(state, *start)
    assert r.returncode == 0, r.stderr
    third = left(state)[2]
    os.kill(int((state / "twin.pid").read_text()), signal.SIGKILL)
    time.sleep(0.5)
    down = lab(state, "down")
    assert "removed 12 namespace(s)" in down.stdout, down.stdout
    assert left(state) == ([], [], []) and alive(third) == []
