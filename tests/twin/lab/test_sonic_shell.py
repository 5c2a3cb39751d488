"""The twin's SONiC personality without sockets: its bash, the updater's all-or-nothing patches, checkpoints,
and background jobs on a stepped clock."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from lab.model import Twin
from lab.sonic_config import GcuError, SonicStore, apply_json_patch
from lab.sonic_shell import ShellSyntaxError, SonicHost, SonicShell, lex, parse
from tests.conftest import EXAMPLES
from topology.blueprint import generate_blueprint
from topology.fabric import Fabric
from topology.spec import load_spec
from topology.units import NS

LEAF = "leaf-g0-r0"


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000 * NS

    def __call__(self) -> int:
        return self.now

    def step(self, seconds: float) -> None:
        self.now += int(seconds * NS)


@pytest.fixture
def lab() -> Iterator[tuple[Twin, Clock, SonicShell]]:
    clock = Clock()
    twin = Twin(Fabric(generate_blueprint(load_spec(EXAMPLES / "small-sonic.yaml"))), clock=clock)
    host = SonicHost(twin, SonicStore(twin).device(LEAF))
    yield twin, clock, SonicShell(host)


def sh(shell: SonicShell, line: str) -> tuple[str, int]:
    out, status, _ = shell.execute(line)
    return out, status


def write(shell: SonicShell, path: str, text: str) -> None:
    assert sh(shell, f"cat > {path} <<'EOF'")[0] == ""
    assert shell.prompt() == "> "
    for line in text.splitlines():
        sh(shell, line)
    assert sh(shell, "EOF") == ("", 0)
    assert shell.prompt() == f"admin@{LEAF}:~$ "


def running(shell: SonicShell) -> dict[str, dict[str, dict[str, str]]]:
    out, status = sh(shell, "show runningconfiguration all")
    assert status == 0
    doc: dict[str, dict[str, dict[str, str]]] = json.loads(out)
    return doc


def test_lexing_quotes_redirections_and_status() -> None:
    assert lex("sleep 2 >x 2>/dev/null") == [
        ("sleep", False), ("2", False), (">", True), ("x", False), ("2>", True), ("/dev/null", False)
    ]  # fmt: skip
    assert [t for t, _ in lex("""echo 'a;b' "c $x" d\\ e # comment""")] == ["echo", "a;b", "c $x", "d e"]
    steps = parse("a && b || c; d & e;")
    assert [(k, c.argv[0]) for k, c in steps] == [(";", "a"), ("&&", "b"), ("||", "c"), (";", "<job>"), (";", "e")]
    assert [c.argv for _, c in steps[3][1].background or []] == [["d"]]
    for bad in ("echo 'open", "a | b", "; ;", "> x"):
        with pytest.raises(ShellSyntaxError):
            parse(bad)


def test_lists_status_and_unknown_commands(lab: tuple[Twin, Clock, SonicShell]) -> None:
    _, _, shell = lab
    assert sh(shell, 'false; echo "rc=$?"; true && echo yes || echo no') == ("rc=1\nyes\n", 0)
    assert sh(shell, "ls /tmp") == ("", 0)  # ls knows folders; nothing there yet
    assert sh(shell, "echo x > /tmp/fabricd_t5_a1_x.pid; ls /tmp") == ("fabricd_t5_a1_x.pid\n", 0)
    assert sh(shell, "ls /nowhere") == ("ls: cannot access '/nowhere': No such file or directory\n", 2)
    assert sh(shell, "frobnicate /tmp") == ("-bash: frobnicate: command not found\n", 127)
    assert sh(shell, 'echo "$?"') == ("127\n", 0)
    assert sh(shell, "config save -y")[0] == "Root privileges are required for this operation\n"
    assert sh(shell, "sleep 1")[1] == 1  # a foreground sleep would stall the twin's loop: refused, not faked
    assert sh(shell, "mkdir /tmp/l") == ("", 0)
    assert sh(shell, "mkdir /tmp/l") == ("mkdir: cannot create directory '/tmp/l': File exists\n", 1)
    assert sh(shell, "rmdir /tmp/l; rmdir /tmp/l")[1] == 1


def test_flock_runs_its_command_and_a_fenced_command_runs_only_while_its_token_file_is_there(
    lab: tuple[Twin, Clock, SonicShell],
) -> None:
    from drivers.sonic.session import _fenced  # the driver's own wrapping (a leader's fenced command)

    _, _, shell = lab
    assert sh(shell, "flock -o /tmp/l.lock echo hi") == ("hi\n", 0)
    assert sh(shell, "flock /tmp/l.lock")[1] == 64  # no command: usage
    timer = "nohup sh -c 'sleep 60; echo late > /tmp/late' >/dev/null 2>&1 </dev/null & echo \"pid=$!\""
    assert sh(shell, _fenced("/tmp/fabricd_lead_t3", timer)) == ("fabricd-fenced-off\n", 1)  # no file: refused
    assert sh(shell, "ls /tmp") == ("", 0)  # nothing ran, no job
    sh(shell, "echo 3 > /tmp/fabricd_lead_t3")
    out, status = sh(shell, _fenced("/tmp/fabricd_lead_t3", timer))
    assert status == 0 and out.startswith("pid=") and int(out[4:]) in shell.host.jobs  # `$!` is the timer's pid


def test_patch_is_all_or_nothing_and_validated(lab: tuple[Twin, Clock, SonicShell]) -> None:
    twin, _, shell = lab
    before = running(shell)
    good = {"op": "add", "path": "/PORT_QOS_MAP", "value": {"Ethernet0": {"pfc_enable": "3"}}}
    cases = {
        'does not satisfy the constraint "up|down"': {
            "op": "replace",
            "path": "/PORT/Ethernet8/admin_status",
            "value": "sideways",
        },
        "can't remove a non-existent object 'Ethernet999'": {"op": "remove", "path": "/PORT/Ethernet999"},
        "points to a non-existing leaf": {"op": "add", "path": "/BUFFER_PG/Ethernet0|3", "value": {"profile": "NOPE"}},
        "result in empty tables": {"op": "remove", "path": "/PFC_WD/GLOBAL"},
        "Unknown operation 'merge'": {"op": "merge", "path": "/PORT"},
        'Missing required element "lanes"': {"op": "add", "path": "/PORT/Ethernet504", "value": {"mtu": "9100"}},
    }
    cases['"100..5000"'] = {"op": "add", "path": "/PFC_WD/Ethernet0", "value": {"detection_time": "9"}}
    write(shell, "/tmp/sched.json", json.dumps([{"op": "remove", "path": "/SCHEDULER/scheduler.1"}]))
    for message, bad in cases.items():
        write(shell, "/tmp/p.json", json.dumps([good, bad]))
        out, status = sh(shell, "sudo config apply-patch /tmp/p.json")
        assert status == 2 and "Failed to apply patch" in out and message in out, out
        assert running(shell) == before
    # the QUEUE entries still refer to scheduler.1: removing it breaks a leafref
    assert sh(shell, "sudo config apply-patch /tmp/sched.json")[1] == 2
    assert not twin.port_config(LEAF, "Ethernet1/1").pfc_enabled
    write(shell, "/tmp/p.json", json.dumps([good]))
    out, status = sh(shell, "sudo config apply-patch --dry-run /tmp/p.json")
    assert status == 0 and out.startswith("** DRY RUN EXECUTION **") and running(shell) == before
    out, status = sh(shell, "sudo config apply-patch /tmp/p.json")
    assert status == 0 and out.endswith("Patch applied successfully.\n")
    assert running(shell)["PORT_QOS_MAP"] == {"Ethernet0": {"pfc_enable": "3"}}
    assert twin.port_config(LEAF, "Ethernet1/1").honours_pause(3)  # the config acts on the model


def test_json_patch_ops() -> None:
    doc = {"A": {"x": {"f": "1"}}}
    assert apply_json_patch(doc, [{"op": "copy", "from": "/A/x", "path": "/A/y"}])["A"]["y"] == {"f": "1"}
    assert apply_json_patch(doc, [{"op": "move", "from": "/A/x", "path": "/A/z"}]) == {"A": {"z": {"f": "1"}}}
    assert apply_json_patch(doc, [{"op": "test", "path": "/A/x/f", "value": "1"}]) == doc
    for bad in (
        [{"op": "test", "path": "/A/x/f", "value": "2"}],
        [{"op": "add", "path": "/B/x", "value": {}}],
        [{"op": "add", "path": "A", "value": {}}],
        [{"path": "/A"}],
    ):
        with pytest.raises(GcuError):
            apply_json_patch(doc, bad)


def test_revert_timer_job_fires_on_the_twin_clock_unless_its_lock_is_taken(lab: tuple[Twin, Clock, SonicShell]) -> None:
    twin, clock, shell = lab
    before = running(shell)
    write(
        shell,
        "/tmp/down.json",
        json.dumps([{"op": "replace", "path": "/PORT/Ethernet8/admin_status", "value": "down"}]),
    )

    def commit(name: str) -> str:
        assert sh(shell, f"sudo -n config checkpoint {name}")[1] == 0
        timer = f"sleep 30; mkdir /tmp/{name}.lock 2>/dev/null && sudo -n config rollback {name}"
        timer += f" && sudo -n config delete-checkpoint {name}"
        out, status = sh(shell, f"nohup sh -c '{timer}' >/dev/null 2>&1 </dev/null & echo \"pid=$!\"")
        assert status == 0 and out.startswith("pid=")
        assert sh(shell, "sudo config apply-patch /tmp/down.json")[1] == 0
        twin.advance()
        assert not twin.switch(LEAF).oper_up[1]  # admin down takes the link down
        return out.strip().removeprefix("pid=")

    commit("cp1")
    clock.step(29)
    twin.advance()
    assert running(shell)["PORT"]["Ethernet8"]["admin_status"] == "down"
    clock.step(2)
    twin.advance()
    assert running(shell) == before  # reverted by the switch itself, checkpoint cleaned up
    assert sh(shell, "sudo config list-checkpoints") == ("[]\n", 0)
    assert twin.switch(LEAF).oper_up[1]

    pid = commit("cp2")
    assert sh(shell, "mkdir /tmp/cp2.lock")[1] == 0  # the confirm wins the lock ...
    assert sh(shell, f"kill {pid}") == ("", 0)
    clock.step(60)
    twin.advance()
    assert running(shell)["PORT"]["Ethernet8"]["admin_status"] == "down"  # ... so the change stays
    assert sh(shell, f"kill {pid}") == (f"-bash: kill: ({pid}) - No such process\n", 1)
    assert json.loads(sh(shell, "sudo config list-checkpoints")[0]) == ["cp2"]


def test_reboot_loads_the_saved_config_and_drops_tmp_and_jobs(lab: tuple[Twin, Clock, SonicShell]) -> None:
    twin, clock, shell = lab
    write(shell, "/tmp/mtu.json", json.dumps([{"op": "replace", "path": "/PORT/Ethernet0/mtu", "value": "4200"}]))
    assert sh(shell, "sudo config apply-patch /tmp/mtu.json")[1] == 0
    assert sh(shell, "sudo config save")[1] == 1  # asks, nobody answers: aborted
    assert sh(shell, "sudo config save -y")[1] == 0
    write(shell, "/tmp/mtu.json", json.dumps([{"op": "replace", "path": "/PORT/Ethernet0/mtu", "value": "1500"}]))
    assert sh(shell, "sudo config apply-patch /tmp/mtu.json; nohup sh -c 'sleep 5; rm /tmp/mtu.json' &")[1] == 0
    clock.step(1)
    twin.switch(LEAF).boot_ns = clock.now  # what the reboot fault does
    assert running(shell)["PORT"]["Ethernet0"]["mtu"] == "4200"  # saved, not the unsaved 1500
    assert sh(shell, "cat /tmp/mtu.json")[1] == 1  # /tmp is tmpfs
    assert shell.host.jobs == set()
