from __future__ import annotations

import pytest

from topology.fabric import Fabric
from topology.labels import complete_labels
from topology.model import Cabling


@pytest.fixture(scope="session")
def small_fabric(small_blueprint: Cabling) -> Fabric:
    return Fabric(complete_labels(small_blueprint))
