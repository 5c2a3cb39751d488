"""Spec loading: valid examples, and errors that name the file, line and field."""

from __future__ import annotations

from pathlib import Path

import pytest

from topology.errors import SpecError
from topology.layout import Layout, parse_name
from topology.model import Role
from topology.spec import load_spec

GOOD = """\
name: t
rails: 2
aggregation_groups: 2
servers_per_group: 2
spines_per_rail: 1
"""


def write(tmp_path: Path, text: str, name: str = "spec.yaml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def test_defaults_apply(tmp_path: Path) -> None:
    spec = load_spec(write(tmp_path, GOOD))
    assert spec.superspines == 0 and spec.oversubscription == 1.0 and spec.cable_m.server == 3
    assert spec.gpus == 8


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (GOOD + "railz: 3\n", "spec.yaml:6: field 'railz': unknown key"),
        (
            GOOD + "cable_m: {server: 3, leaf_spyne: 30}\n",
            "spec.yaml:6: field 'cable_m.leaf_spyne': unknown key",
        ),
        (
            GOOD.replace("rails: 2", "rails: two"),
            "spec.yaml:2: field 'rails': Input should be a valid integer",
        ),
        (GOOD.replace("spines_per_rail: 1\n", ""), "field 'spines_per_rail': required field is missing"),
        (GOOD + "dci:\n  - name: b\n    distance_km: -5\n", "spec.yaml:8: field 'dci[0].distance_km'"),
        (GOOD + "platforms: {leaf: junos}\n", "field 'platforms.leaf': Input should be 'eos' or 'sonic'"),
        ("name: t\nrails: [1\n", "spec.yaml:3: invalid YAML"),
        ("- 1\n- 2\n", "a fabric spec must be a mapping"),
    ],
)
def test_bad_spec_names_file_line_and_field(tmp_path: Path, text: str, expected: str) -> None:
    with pytest.raises(SpecError) as exc:
        load_spec(write(tmp_path, text))
    assert expected in str(exc.value)
    assert str(tmp_path / "spec.yaml") in str(exc.value)
    assert "\n" not in str(exc.value)


def test_missing_spec_file(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="file not found"):
        load_spec(tmp_path / "nope.yaml")


def test_duplicate_dci_names(tmp_path: Path) -> None:
    text = GOOD + "dci:\n  - {name: b, distance_km: 10}\n  - {name: b, distance_km: 20}\n"
    with pytest.raises(SpecError, match="repeated: b"):
        load_spec(write(tmp_path, text))


def test_names_round_trip_through_the_parser(tmp_path: Path) -> None:
    spec = load_spec(write(tmp_path, GOOD + "superspines: 2\ndci:\n  - {name: campus-b, distance_km: 120}\n"))
    lay = Layout(spec)
    cases = {
        lay.server_name(1, 1): (Role.SERVER, None, 1),
        lay.leaf_name(1, 0): (Role.LEAF, 0, 1),
        lay.spine_name(1, 0): (Role.SPINE, 1, None),
        lay.superspine_name(1): (Role.SUPERSPINE, None, None),
        lay.dr_name("campus-b", 1): (Role.DR, None, None),
    }
    for name, (role, rail, group) in cases.items():
        dev = lay.device(name)
        assert dev is not None, name
        assert (dev.role, dev.rail, dev.group) == (role, rail, group)
    assert lay.server_name(0, 7) == "gpu-g0-007"
    assert lay.device("leaf-g5-r0") is None  # group out of range
    assert lay.device("gpu-g0-7") is None  # not the spec's zero-padding
    remote = lay.device("remote-campus-b-dr-0")
    assert remote is not None and remote.site == "campus-b"
    assert parse_name("core-router-1") is None
