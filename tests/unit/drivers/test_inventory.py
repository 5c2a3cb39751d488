"""Inventory: defaults and overrides, secrets only from the environment or 0600 files, clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from drivers.inventory import InventoryError, load_inventory

INVENTORY = """\
defaults:
  username: fabricd
  password_file: switch.secret
  gnmi: {port: 6030}
  eapi: {port: 443, transport: https}
devices:
  leaf-g0-r0: {host: 10.0.0.11}
  spine-r0-0: {host: 10.0.1.1, password_env: SPINE_PW, gnmi: {port: 50051, tls: false}}
"""


@pytest.fixture
def inventory(tmp_path: Path) -> Path:
    secret = tmp_path / "switch.secret"
    secret.write_text("s3cret\n")
    secret.chmod(0o600)
    path = tmp_path / "inventory.yaml"
    path.write_text(INVENTORY)
    return path


def test_defaults_apply_and_devices_override(inventory: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPINE_PW", "from-env")
    inv = load_inventory(inventory)
    leaf = inv.access("leaf-g0-r0")
    assert (leaf.host, leaf.username, leaf.gnmi.port, leaf.gnmi.tls, leaf.eapi.transport) == (
        "10.0.0.11", "fabricd", 6030, True, "https"
    )  # fmt: skip
    assert leaf.password.get_secret_value() == "s3cret"
    spine = inv.access("spine-r0-0")
    assert spine.password.get_secret_value() == "from-env"
    assert (spine.gnmi.port, spine.gnmi.tls) == (50051, False)


def test_secrets_never_print(inventory: Path) -> None:
    access = load_inventory(inventory).access("leaf-g0-r0")
    assert "s3cret" not in repr(access) and "s3cret" not in str(access)


def test_a_secret_file_others_can_read_is_refused(inventory: Path) -> None:
    (inventory.parent / "switch.secret").chmod(0o644)
    with pytest.raises(InventoryError, match="readable by others; chmod 600"):
        load_inventory(inventory).access("leaf-g0-r0")


def test_missing_env_and_unknown_device_say_what_to_do(inventory: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SPINE_PW", raising=False)
    inv = load_inventory(inventory)
    with pytest.raises(InventoryError, match="environment variable SPINE_PW is not set"):
        inv.access("spine-r0-0")
    with pytest.raises(InventoryError, match="device 'ssp-9' is not in the inventory"):
        inv.access("ssp-9")


def test_plaintext_password_key_is_an_error_with_its_line(tmp_path: Path) -> None:
    path = tmp_path / "inv.yaml"
    path.write_text("devices:\n  leaf-g0-r0:\n    host: 10.0.0.1\n    password: hunter2\n")
    with pytest.raises(InventoryError) as err:
        load_inventory(path)
    assert f"{path}:4" in str(err.value) and "password" in str(err.value)
    assert "hunter2" not in str(err.value)
