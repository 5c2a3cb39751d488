"""The twin's SONiC CONFIG_DB as the switch's daemons see it: a port's description (where fabricd writes its mark)
reaches what the switch shows, as an admin status does."""

from __future__ import annotations

import json

from lab.model import Twin
from lab.sonic_config import SonicStore, derive_port_config, lldp_port_descr
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


def test_the_lossless_pg_profile_sets_the_congestion_models_headroom_and_threshold() -> None:
    """What fabricd renders (drivers/sonic/render.py): BUFFER_PG <port>|3-4 -> a profile with xoff (the headroom) and
    dynamic_th; a PG that is not lossless, or no profile, leaves the twin's defaults."""
    db = {
        "PORT": {"Ethernet0": {"admin_status": "up"}, "Ethernet8": {"admin_status": "up"}},
        "PORT_QOS_MAP": {"Ethernet0": {"pfc_enable": "3,4"}, "Ethernet8": {"pfc_enable": "3,4"}},
        "BUFFER_PG": {
            "Ethernet0|3-4": {"profile": "FABRICD_PG_LOSSLESS_100000"},
            "Ethernet8|0": {"profile": "FABRICD_PG_LOSSY"},
        },
        "BUFFER_PROFILE": {
            "FABRICD_PG_LOSSLESS_100000": {"xoff": "81568", "size": "100000", "dynamic_th": "-2"},
            "FABRICD_PG_LOSSY": {"size": "0", "dynamic_th": "3"},
        },
    }
    ours = derive_port_config(db, "Ethernet0")
    assert (ours.pg_headroom_bytes, ours.pg_dynamic_th) == (81568, -2)
    other = derive_port_config(db, "Ethernet8")
    assert (other.pg_headroom_bytes, other.pg_dynamic_th) == (0, None)
