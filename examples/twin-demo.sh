#!/usr/bin/env bash
# The main job on the built-in lab: start the twin of examples/small-pod.yaml, check the cabling, show the
# dry-run plan, push it (canary first, revert timer, verify, confirm), show that nothing is left to change,
# then run the fabricd service against the twin, inject a link flap and watch the finding, the guarded
# action (port down under a revert timer, verified through gNMI, confirmed) and the repair ticket appear;
# resolve the ticket (the port comes back), stop the service and the twin. Run from the repository root.
set -u
FABRICD=${FABRICD:-.venv/bin/fabricd}
SPEC=examples/small-pod.yaml
STATE=${FABRICD_LAB_DIR:-.fabricd-lab}
INV=$STATE/inventory.yaml

API_PORT=${FABRICD_DEMO_API_PORT:-8340}
API=http://127.0.0.1:$API_PORT
SERVICE_PID=
cleanup() {
  [ -n "$SERVICE_PID" ] && kill "$SERVICE_PID" 2>/dev/null && wait "$SERVICE_PID" 2>/dev/null
  $FABRICD lab down --state-dir "$STATE" >/dev/null 2>&1
}
trap cleanup EXIT
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

step "run the fabricd service against the twin (auto mode; examples/fabricd.yaml, log in $STATE/fabricd.log)"
FABRICD_API_TOKEN=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
case $STATE in /*) ABS_STATE=$STATE ;; *) ABS_STATE=$PWD/$STATE ;; esac
export FABRICD_API_TOKEN FABRICD_INVENTORY="$ABS_STATE/inventory.yaml" FABRICD_STATE="$ABS_STATE/fabricd-state.db"
export FABRICD_REMEDIATION__MODE=auto FABRICD_API__PORT=$API_PORT
rm -f "$STATE/fabricd-state.db"*
$FABRICD run --config examples/fabricd.yaml 2>"$STATE/fabricd.log" &
SERVICE_PID=$!
wait_until() {  # wait_until SECONDS COMMAND...: retry until the command succeeds
  local end=$((SECONDS + $1)); shift
  until "$@" >/dev/null 2>&1; do
    kill -0 "$SERVICE_PID" 2>/dev/null || { echo "the service stopped:"; tail -20 "$STATE/fabricd.log"; return 1; }
    [ $SECONDS -ge $end ] && { echo "timed out: $*"; tail -20 "$STATE/fabricd.log"; return 1; }
    sleep 0.5
  done
}
wait_until 60 $FABRICD status --api $API
$FABRICD status --api $API

step "inject a link flap on leaf-g0-r0:Ethernet1/1 (faces gpu-g0-000) and wait for the ticket"
$FABRICD lab inject link_flap --port leaf-g0-r0:Ethernet1/1 --count 10 --period 0.5 --state-dir "$STATE"
has_ticket() { ! $FABRICD tickets --api $API --open --format table; }  # exit 1 = open tickets
wait_until 60 has_ticket
wait_until 30 sh -c "$FABRICD actions --api $API --format json | grep -q '\"status\": \"done\"'"
$FABRICD findings --api $API || true
$FABRICD actions --api $API
$FABRICD tickets --api $API --show 1

step "the repair is done: resolve the ticket; fabricd brings the port back (on probation)"
$FABRICD resolve 1 --api $API
wait_until 30 sh -c "$FABRICD actions --api $API --format json | grep -q '\"op\": \"enable\"'"
$FABRICD actions --api $API
step "done"
