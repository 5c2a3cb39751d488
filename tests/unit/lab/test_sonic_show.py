"""The twin's sonic-utilities tables as a SONiC switch prints them (no sockets): `show interfaces description`
(intfutil's description view) in the exact layout sonic-utilities' own tests expect of it (tests/intfutil_test.py:
tabulate "simple", right-aligned, every column at least its header plus two), with what the config says."""

from __future__ import annotations

import json

from lab.model import Twin
from lab.sonic_config import SonicStore
from lab.sonic_shell import SonicHost, SonicShell
from tests.conftest import EXAMPLES
from topology.load import load_fabric

LEAF = "leaf-g0-r0"


def shell() -> SonicShell:
    twin = Twin(load_fabric(EXAMPLES / "small-sonic.yaml", None)[1], clock=lambda: 0)
    return SonicShell(SonicHost(twin, SonicStore(twin).device(LEAF)))


def run(sh: SonicShell, line: str) -> str:
    out, status, _ = sh.execute(line)
    assert status == 0, out
    return out


def test_interfaces_description_is_intfutils_table() -> None:
    sh = shell()
    patch = [{"op": "add", "path": "/PORT/Ethernet16/description", "value": "Servers7:eth0"}]
    run(sh, f"echo '{json.dumps(patch)}' > /tmp/p.json && sudo config apply-patch /tmp/p.json")
    # sonic-utilities' show_interface_description_eth9_output, on this switch's port
    assert run(sh, "show interfaces description Ethernet16") == (
        "  Interface    Oper    Admin    Alias    Description\n"
        "-----------  ------  -------  -------  -------------\n"
        " Ethernet16      up       up     etp3  Servers7:eth0\n"
    )
    # every port in natural order (Ethernet8 before Ethernet16); no description in CONFIG_DB reads N/A
    assert run(sh, "show interfaces description") == (
        "  Interface    Oper    Admin    Alias    Description\n"
        "-----------  ------  -------  -------  -------------\n"
        "  Ethernet0      up       up     etp1            N/A\n"
        "  Ethernet8      up       up     etp2            N/A\n"
        " Ethernet16      up       up     etp3  Servers7:eth0\n"
        " Ethernet24      up       up     etp4            N/A\n"
    )


def test_interfaces_description_follows_a_shutdown_and_fabricds_mark() -> None:
    sh = shell()
    mark = "[fabricd: down a12 t7 link_flap]"
    patch = [
        {"op": "add", "path": "/PORT/Ethernet16/admin_status", "value": "down"},
        {"op": "add", "path": "/PORT/Ethernet16/description", "value": mark},
    ]  # what fabricd's SONiC driver patches when it shuts a port (drivers/sonic/session.py set_port_admin)
    run(sh, f"echo '{json.dumps(patch)}' > /tmp/p.json && sudo config apply-patch /tmp/p.json")
    run(sh, "sudo config interface shutdown Ethernet8")
    sh.host.twin.advance()  # as the SSH transport does before each command: the links follow the config
    lines = run(sh, "show interfaces description").splitlines()
    assert lines[1] == "-----------  ------  -------  -------  --------------------------------"
    assert lines[3] == "  Ethernet8    down     down     etp2                               N/A"
    assert lines[4] == f" Ethernet16    down     down     etp3  {mark}"
    assert run(sh, "show interfaces description Ethernet99").count("\n") == 2  # no such port: headers only


def test_interfaces_status_columns_are_at_least_their_header_and_two() -> None:
    header, rule = run(shell(), "show interfaces status").splitlines()[:2]
    assert header.startswith("  Interface  ") and " Oper  " in header
    assert rule.split("  ")[:2] == ["-" * 11, "-" * 23] and rule.split("  ")[7:9] == ["------", "-------"]
