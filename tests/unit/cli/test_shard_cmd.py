"""`fabricd shard` refuses shard numbers the fabric cannot meet, and a service config with source: shards but no
count, each with one line naming the file and what to do (exit 2)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from fabricd.cli import main
from tests.conftest import EXAMPLES


def _config(tmp_path: Path, **detectors: object) -> Path:
    inv = tmp_path / "inventory.yaml"
    inv.write_text(yaml.safe_dump({"defaults": {"username": "u", "password_env": "NOPE"},
                                   "devices": {"leaf-g0-r0": {"host": "192.0.2.1"}}}))  # fmt: skip
    cfg = tmp_path / "fabricd.yaml"
    cfg.write_text(yaml.safe_dump({"spec": str(EXAMPLES / "small-pod.yaml"), "inventory": str(inv),
                                   "detectors": dict(detectors)}))  # fmt: skip
    return cfg


@pytest.mark.parametrize(
    ("index", "count", "says"),
    [("2", "2", "the index must be in 0..count-1"), ("0", "3", "3 shards for 2 aggregation groups: use at most 2")],
)
def test_impossible_shards(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], index: str, count: str, says: str
) -> None:
    cfg = _config(tmp_path)
    assert main(["shard", "--config", str(cfg), "--index", index, "--count", count]) == 2
    err = capsys.readouterr().err
    assert str(cfg) in err and "--index/--count" in err and says in err and "Traceback" not in err


def test_source_shards_needs_the_count(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = _config(tmp_path, source="shards")
    assert main(["status", "--config", str(cfg)]) == 2
    err = capsys.readouterr().err
    assert str(cfg) in err and "shards: N" in err and len(err.strip().splitlines()) == 1
