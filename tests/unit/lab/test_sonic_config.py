"""The twin's SONiC CONFIG_DB as the switch's daemons see it: a port's description (where fabricd writes its mark)
reaches what the switch shows, as an admin status does."""

from __future__ import annotations

import json

from lab.model import Twin
from lab.sonic_config import SonicStore, lldp_port_descr
from lab.sonic_gnmi import port_table
from tests.conftest import EXAMPLES
from topology.load import load_fabric
from topology.model import Endpoint

LEAF, PORT, SONIC = "leaf-g0-r0", "Ethernet3/1", "Ethernet16"  # a SONiC leaf's uplink (8 lanes a port)


def test_a_patched_description_is_the_ports_description() -> None:
    twin = Twin(load_fabric(EXAMPLES / "small-sonic.yaml", None)[1], clock=lambda: 0)
    dev = SonicStore(twin).device(LEAF)
    sw = twin.switch(LEAF)
    marked = "[fabricd: down a3 t- maintenance]"
    patch = [
        {"op": "add", "path": f"/PORT/{SONIC}/admin_status", "value": "down"},
        {"op": "add", "path": f"/PORT/{SONIC}/description", "value": marked},
    ]
    dev.apply_patch(json.dumps(patch), dry_run=False)
    cfg = twin.port_config(LEAF, PORT)
    assert (cfg.admin_up, cfg.description) == (False, marked)
    assert port_table(sw, sw.index[PORT])["description"] == marked  # APPL_DB PORT_TABLE
    assert lldp_port_descr(twin, Endpoint(LEAF, PORT)) == marked  # lldpmgrd passes it to lldpd once set
    dev.apply_patch(json.dumps([{"op": "remove", "path": f"/PORT/{SONIC}/description"}]), dry_run=False)
    assert twin.port_config(LEAF, PORT).description == ""
    assert lldp_port_descr(twin, Endpoint(LEAF, PORT)) == SONIC
