"""`lab up --daemons real` says in one line why it cannot run: not root, or FRR's daemons or lldpd missing."""

from __future__ import annotations

from pathlib import Path

from lab.daemons import missing, tag_of


def test_not_root_is_one_line() -> None:
    why = missing(euid=1000)
    assert why == "--daemons real needs root (network namespaces and veth pairs): run `fabricd lab up` as root"


def test_missing_daemons_are_named(tmp_path: Path) -> None:
    why = missing(euid=0, frr=tmp_path, path=str(tmp_path))
    assert why is not None and "\n" not in why
    assert why.startswith(f"--daemons real needs FRR and lldpd: {tmp_path / 'bgpd'}, {tmp_path / 'zebra'}, vtysh")
    assert why.endswith("not found (apt-get install frr lldpd iproute2)")


def test_a_state_dir_names_its_namespaces_and_veths_in_15_characters(tmp_path: Path) -> None:
    tag = tag_of(tmp_path)
    assert len(tag) == 5 and tag == tag_of(tmp_path / "." / "")
    assert len(f"f{tag}9999b") <= 15  # a veth's name in the root namespace, before it moves
