#!/usr/bin/env bash
# The main job on the built-in lab: start the twin of examples/small-pod.yaml, check the cabling, show the
# dry-run plan, push it (canary first, revert timer, verify, confirm), show that nothing is left to change,
# inject a PFC storm and look at the twin, then stop the twin. Run from the repository root.
set -u
FABRICD=${FABRICD:-.venv/bin/fabricd}
SPEC=examples/small-pod.yaml
STATE=${FABRICD_LAB_DIR:-.fabricd-lab}
INV=$STATE/inventory.yaml

trap '$FABRICD lab down --state-dir "$STATE" >/dev/null 2>&1' EXIT
$FABRICD lab down --state-dir "$STATE" >/dev/null 2>&1
set -e
step() { printf '\n== %s\n' "$*"; }

step "start the twin (one loopback address per switch: gNMI, eAPI, SSH)"
$FABRICD lab up --spec $SPEC --state-dir "$STATE"

step "validate the cabling (blueprint: clean)"
$FABRICD validate --spec $SPEC

step "dry run: what fabricd would push to two switches (exit 1 = changes)"
$FABRICD plan --spec $SPEC --inventory "$INV" --device leaf-g0-r0 --device spine-r0-0 --format text || [ $? -eq 1 ]

step "apply to the whole fabric: canary first, then batches, each under a 120 s revert timer"
$FABRICD apply --spec $SPEC --inventory "$INV" --yes --revert-in 120 --batch 4 || [ $? -eq 1 ]

step "plan again: nothing left to change (exit 0)"
$FABRICD plan --spec $SPEC --inventory "$INV" --format text

step "inject a PFC storm from a server NIC and look at the twin"
$FABRICD lab inject pfc_storm --nic gpu-g0-000:nic0 --priority 3 --state-dir "$STATE"
$FABRICD lab status --state-dir "$STATE"
$FABRICD lab clear --state-dir "$STATE"
step "done"
