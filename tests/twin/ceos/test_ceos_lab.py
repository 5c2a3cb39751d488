"""The end-to-end apply tests against a containerlab cEOS lab (FABRICD_LAB=clab), skipped otherwise.

Bring a lab up with `fabricd topology export --spec examples/small-pod.yaml --format clab -o lab.clab.yml
--startup-dir configs && containerlab deploy -t lab.clab.yml`, write an inventory for it (docs/inventory.md;
eapi transport http, gnmi tls false), then run
`FABRICD_LAB=clab FABRICD_CLAB_INVENTORY=inventory.yaml pytest -m ceos tests/twin/ceos`.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from drivers.inventory import load_inventory
from fabricd.rollout import ApplyOptions, apply_all, plan_all, targets
from policies.intent import derive_intent
from policies.policy import load_policy
from tests.conftest import EXAMPLES
from topology.blueprint import generate_blueprint
from topology.fabric import Fabric
from topology.spec import load_spec

pytestmark = pytest.mark.ceos


def _inventory() -> Path:
    if os.environ.get("FABRICD_LAB") != "clab":
        pytest.skip("no containerlab lab: set FABRICD_LAB=clab and FABRICD_CLAB_INVENTORY to run")
    path = Path(os.environ.get("FABRICD_CLAB_INVENTORY", "inventory.yaml"))
    if not path.exists():
        pytest.skip(f"FABRICD_CLAB_INVENTORY {path} does not exist")
    return path


def test_apply_then_plan_is_clean_on_ceos() -> None:
    inventory = load_inventory(_inventory())
    spec = load_spec(EXAMPLES / "small-pod.yaml")
    fabric = Fabric(generate_blueprint(spec))
    devices = {"leaf-g0-r0"} & set(inventory.names)
    if not devices:
        pytest.skip("leaf-g0-r0 is not in the containerlab inventory")
    items = targets(derive_intent(fabric, spec, load_policy(None), devices).devices, inventory)
    results = apply_all(items, ApplyOptions(revert_in_s=120))
    assert [r.status for r in results] in (["applied"], ["unchanged"]), [r.error for r in results]
    assert not any(p.changed for p in plan_all(items))
