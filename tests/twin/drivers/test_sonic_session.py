"""How the SONiC session reads what a switch prints: recorded SONiC outputs, no sockets."""

from __future__ import annotations

import socket

import pytest
from pydantic import SecretStr

from drivers.base import UnreachableError
from drivers.inventory import DeviceAccess, EapiAccess, GnmiAccess, SshAccess
from drivers.sonic.driver import SonicDriver
from drivers.sonic.session import _fields, _summary, _table
from tests.conftest import DATA

# Recorded outputs: `show interfaces status` as sonic-mgmt's show_and_parse documents it
# (tests/common/devices/sonic.py); `config replace` refusing a config (the updater's log lines, then click's
# ctx.fail text) as a SONiC user reported it.
OUTPUTS = DATA / "sonic_outputs"
INTERFACES = (OUTPUTS / "show_interfaces_status.txt").read_text()
REFUSED = (OUTPUTS / "config_replace_refused.txt").read_text()


def test_interfaces_status_columns_are_cut_at_the_dashes() -> None:
    rows = _table(INTERFACES)
    assert [r["Interface"] for r in rows] == ["Ethernet0", "Ethernet4"]
    assert [r["Oper"] for r in rows] == ["up", "down"]
    assert rows[0]["Type"] == "QSFP+ or later" and rows[0]["Asym PFC"] == "off" and rows[0]["Lanes"] == "0,1,2,3"
    assert _table("no table here\n") == []


def test_summary_is_the_updaters_error_else_the_last_line() -> None:
    assert _summary(REFUSED) == (
        "Given patch will produce invalid config. Error: Data Loading Failed "
        'Value "public" does not satisfy the constraint "Vlan(409[0-5]|40[0-8][0-9])" (range, length, or pattern).'
    )
    assert _summary("sudo: a password is required\n") == "sudo: a password is required"
    assert _summary("") == "no output"


def test_show_version_fields() -> None:
    text = "\nSONiC Software Version: SONiC.202305.1\nHwSKU: Mellanox-SN4700-O8C48\nUptime: 17:47:47 up 50 min\n"
    fields = _fields(text)
    assert fields["SONiC Software Version"] == "SONiC.202305.1"
    assert fields["HwSKU"] == "Mellanox-SN4700-O8C48"
    assert fields["Uptime"] == "17:47:47 up 50 min"


def test_unreachable_switch_is_unreachable_and_keeps_the_password_out() -> None:
    with socket.socket() as s:  # a port nothing listens on: the connection is refused at once
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    access = DeviceAccess(
        "leaf-x",
        "127.0.0.1",
        "sonic",
        "admin",
        SecretStr("hunter2-secret"),
        GnmiAccess(),
        EapiAccess(),
        SshAccess(port=port),
    )
    with pytest.raises(UnreachableError) as info:
        SonicDriver().connect(access, timeout_s=3)
    assert str(info.value).startswith("leaf-x: cannot reach SSH at 127.0.0.1:")
    assert "hunter2-secret" not in str(info.value)
