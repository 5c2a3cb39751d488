"""`fabricd lab ...`: start, stop and inspect the fabric twin, and inject faults into it."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from drivers.inventory import load_inventory
from fabricd.cli.output import Format, console, emit_json, err_console
from fabricd.telemetry.record import record_trace
from lab import control_client
from lab import daemons as lab_daemons
from lab.chaos.facts import FabricFacts
from lab.chaos.history import Limits, Run, load_run, run_doc
from lab.eos_releases import DEFAULT_EOS_VERSION, VersionError, release
from lab.saved_config import SAVED_DIR
from lab.sonic_releases import DEFAULT_RELEASE as DEFAULT_SONIC_RELEASE
from lab.sonic_releases import SonicReleaseError, release_of
from topology.spec import load_spec

app = typer.Typer(help="The fabric twin: gNMI, eAPI and SSH for every switch of a spec, with fault injection.")

STATE_DIR = typer.Option(Path(".fabricd-lab"), "--state-dir", help="Where the twin keeps inventory, secret, logs.")


LabError = control_client.LabControlError  # one error for everything `fabricd lab` cannot do


def _pid(state_dir: Path) -> int | None:
    try:
        pid = int((state_dir / "twin.pid").read_text())
    except (OSError, ValueError):
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        pass
    with contextlib.suppress(OSError, IndexError):
        # A twin killed with -9 whose parent has gone stays a zombie until something reaps it (a container whose
        # first process reaps nothing): it answers kill(0) but is dead.
        if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
            return None
    return pid


_control = control_client.call  # every call to the twin's control API goes through lab/control_client.py


@app.command("up")
def up(
    spec: Path = typer.Option(..., "--spec", help="Fabric spec (YAML)."),
    state_dir: Path = STATE_DIR,
    foreground: bool = typer.Option(False, "--foreground", help="Run in this terminal until Ctrl-C."),
    base_address: str = typer.Option("127.42.0.1", "--base-address", help="First loopback address."),
    port_offset: int = typer.Option(0, "--port-offset", help="Added to the gNMI/eAPI/SSH ports."),
    probe_interval: float = typer.Option(5.0, "--probe-interval", help="Seconds between host probe rounds."),
    timeout: float = typer.Option(120.0, "--timeout", help="Seconds to wait for the twin to come up."),
    eos_version: str = typer.Option(
        DEFAULT_EOS_VERSION, "--eos-version", help="EOS release the switches run (gNMI paths follow it), e.g. 4.31.2F."
    ),
    sonic_version: str = typer.Option(
        DEFAULT_SONIC_RELEASE,
        "--sonic-version",
        help="SONiC release the SONiC switches run (sonic-gnmi's paths follow it): 202305, 202311, 202405, 202411...",
    ),
    sonic_aliases: bool = typer.Option(
        False, "--sonic-aliases", help="sonic-gnmi keys its counters by the ports' aliases (a vendor's setting)."
    ),
    sonic_no_neigh_state: bool = typer.Option(
        False,
        "--sonic-no-neigh-state",
        help="The SONiC switches' STATE_DB has no NEIGH_STATE_TABLE rows (FRR in unified or split mode: bgpmon writes "
        "nothing) while vtysh still answers: fabricd reads their BGP state over SSH (docs/lab.md).",
    ),
    daemons: str = typer.Option(
        "model",
        "--daemons",
        help="model (default) or real: the SONiC switches' BGP and LLDP from FRR and lldpd, a network namespace per "
        "switch and a veth per cable (root; docs/lab.md).",
    ),
) -> None:
    """Start the twin for every switch of SPEC and write STATE_DIR/inventory.yaml."""
    if daemons not in ("model", "real"):
        raise LabError(f"--daemons must be model or real, got {daemons!r}")
    if daemons == "real" and (why := lab_daemons.missing()) is not None:
        raise LabError(why)
    try:
        release(eos_version)
    except VersionError as e:
        raise LabError(f"--eos-version: {e}") from None
    try:
        release_of(sonic_version)
    except SonicReleaseError as e:
        raise LabError(f"--sonic-version: {e}") from None
    load_spec(spec)  # a bad spec fails here with its file:line, not in a background log
    if _pid(state_dir) is not None:
        raise LabError(f"a twin is already running with state dir {state_dir}; `fabricd lab down` first")
    if (state_dir / "__init__.py").exists():
        raise LabError(
            f"--state-dir {state_dir} is a Python package ({state_dir / '__init__.py'}): the twin writes its password,"
            " keys and logs there; use a folder of its own (the default is .fabricd-lab)"
        )
    state_dir.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(state_dir / SAVED_DIR, ignore_errors=True)  # a new lab: no switch has saved anything yet
    args = [sys.executable, "-m", "lab", "--spec", str(spec), "--state-dir", str(state_dir)]
    args += ["--base-address", base_address, "--port-offset", str(port_offset), "--probe-interval", str(probe_interval)]
    args += ["--eos-version", eos_version, "--sonic-version", sonic_version]
    if sonic_aliases:
        args.append("--sonic-aliases")
    if sonic_no_neigh_state:
        args.append("--sonic-no-neigh-state")
    args += ["--daemons", daemons]
    if foreground:
        raise typer.Exit(subprocess.call(args))
    (state_dir / "ready").unlink(missing_ok=True)
    log = (state_dir / "twin.log").open("ab")
    proc = subprocess.Popen(
        args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
    )
    deadline = time.monotonic() + timeout
    while not (state_dir / "ready").exists():
        if proc.poll() is not None:
            lines = (state_dir / "twin.log").read_text().strip().splitlines()
            raise LabError(f"twin did not start: {lines[-1] if lines else 'no output'} (log: {state_dir}/twin.log)")
        if time.monotonic() > deadline:
            proc.terminate()
            raise LabError(f"twin did not come up within {timeout:g} s (log: {state_dir}/twin.log)")
        time.sleep(0.1)
    console().print(f"twin up: {(state_dir / 'ready').read_text().strip()}; inventory {state_dir / 'inventory.yaml'}")


@app.command("down")
def down(state_dir: Path = STATE_DIR, timeout: float = typer.Option(15.0, "--timeout")) -> None:
    """Stop the twin."""
    pid = _pid(state_dir)
    if pid is None:
        left = lab_daemons.cleanup(state_dir) if os.geteuid() == 0 else []  # what a twin killed with -9 left
        console().print("no twin running" + (f"; removed {len(left)} namespace(s)/veth(s) it left" if left else ""))
        return
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while _pid(state_dir) is not None and time.monotonic() < deadline:
        time.sleep(0.1)
    if _pid(state_dir) is not None:
        os.kill(pid, signal.SIGKILL)
        (state_dir / "twin.pid").unlink(missing_ok=True)
    left = lab_daemons.cleanup(state_dir) if os.geteuid() == 0 else []  # a killed twin did not stop its daemons
    console().print("twin stopped" + (f"; removed {len(left)} namespace(s)/veth(s) it left" if left else ""))


@app.command("status")
def status(state_dir: Path = STATE_DIR, fmt: Format = typer.Option(Format.table, "--format")) -> None:
    """Switches, ports down and active faults of the running twin."""
    info = _control(state_dir, "GET", "/status")
    if fmt == Format.json:
        emit_json(info)
        return
    console().print(
        f"twin of {info['fabric']}: {info['switches']} switches, {info['ports']} ports, "
        f"{info['ports_down']} down, up {info['uptime_s']} s (pid {info['pid']})"
    )
    _fault_table(info["active_faults"], "active faults")


def _fault_table(records: list[dict[str, Any]], title: str) -> None:
    if not records:
        console().print(f"no {title}")
        return
    table = Table(title=title)
    for col in ("id", "kind", "where", "params", "start", "cleared"):
        table.add_column(col)
    for r in records:
        where = ", ".join(r["ports"] or r["devices"])
        params = " ".join(f"{k}={v}" for k, v in r["params"].items())
        start = time.strftime("%H:%M:%S", time.localtime(r["start_ts"] / 1e9))
        cleared = time.strftime("%H:%M:%S", time.localtime(r["cleared_ts"] / 1e9)) if r["cleared_ts"] else ""
        table.add_row(r["id"], r["kind"], where, params, start, cleared)
    console().print(table)


@app.command("inject")
def inject(
    kind: str = typer.Argument(
        ...,
        help="link_flap, link_down, pfc_storm, pfc_deadlock, link_corruption, silent_corruption, optics, "
        "optics_degrade, reboot, gnmi_drop, microburst, counter_wrap, dci_imbalance, dci_drops, miscable, bgp_down, "
        "bgp_flap",
    ),
    state_dir: Path = STATE_DIR,
    port: str | None = typer.Option(None, "--port", help="device:port (link faults, optics)."),
    other: str | None = typer.Option(None, "--other", help="miscable: the other cable's near end (device:port)."),
    nic: str | None = typer.Option(None, "--nic", help="server:nicK (pfc_storm, microburst)."),
    device: str | None = typer.Option(None, "--device", help="Switch (silent_corruption, reboot, gnmi_drop)."),
    cycle: str | None = typer.Option(None, "--cycle", help="Switches in cycle order, comma-separated (deadlock)."),
    failed: list[str] = typer.Option(
        [],
        "--failed",
        help="pfc_deadlock: take this link down (devA--devB or a:port--b:port; repeatable) and "
        "deadlock the cycle its bouncing routes close, instead of --cycle.",
    ),
    priority: int | None = typer.Option(None, "--priority"),
    count: int | None = typer.Option(None, "--count", help="Flaps."),
    period_s: float | None = typer.Option(None, "--period", help="Seconds between flaps."),
    rate: float | None = typer.Option(None, "--rate", help="Frame error rate (corruption)."),
    direction: str | None = typer.Option(None, "--direction", help="rx, tx or both, seen from --port."),
    loss_db: float | None = typer.Option(None, "--loss-db", help="Optical power lost (optics)."),
    seconds: float | None = typer.Option(None, "--seconds", help="How long gNMI stays away (gnmi_drop)."),
    down_s: float | None = typer.Option(None, "--down", help="Seconds down (reboot, each flap)."),
    duration_ms: float | None = typer.Option(None, "--duration-ms", help="Microburst length."),
    dci: str | None = typer.Option(None, "--dci", help="DCI name (dci_imbalance)."),
    skew: float | None = typer.Option(None, "--skew", help="(max - min) / mean load of the DCI ports."),
    pattern: str | None = typer.Option(None, "--pattern", help="polarized or spread (dci_imbalance)."),
    db_per_hour: float | None = typer.Option(
        None, "--db-per-hour", help="Receive power lost per hour (optics_degrade)."
    ),
    c_per_hour: float | None = typer.Option(
        None, "--c-per-hour", help="Degrees the module warms per hour (optics_degrade; default 0)."
    ),
    fmt: Format = typer.Option(Format.table, "--format"),
) -> None:
    """Inject a fault; it is logged with its time (`fabricd lab faults`)."""
    given = {
        "port": port, "other": other, "nic": nic, "device": device, "cycle": cycle, "priority": priority,
        "count": count, "period_s": period_s, "rate": rate, "direction": direction, "loss_db": loss_db,
        "seconds": seconds, "down_s": down_s, "duration_ms": duration_ms, "failed": failed or None, "dci": dci,
        "skew": skew, "pattern": pattern, "db_per_hour": db_per_hour, "c_per_hour": c_per_hour,
    }  # fmt: skip
    params = {k: v for k, v in given.items() if v is not None}
    record = _control(state_dir, "POST", "/faults", {"kind": kind, "params": params})
    if fmt == Format.json:
        emit_json(record)
    else:
        console().print(f"injected {record['id']}: {kind} at {', '.join(record['ports'] or record['devices'])}")


@app.command("clear")
def clear(
    fault_id: str | None = typer.Argument(None, help="Fault id (default: every active fault)."),
    state_dir: Path = STATE_DIR,
) -> None:
    """Clear one fault or all of them."""
    _clear(state_dir, "faults", "fault", fault_id)


def _clear(state_dir: Path, collection: str, what: str, one: str | None) -> None:
    """DELETE one record of the control API's collection (faults, workloads) or all of them, and say which."""
    cleared = _control(state_dir, "DELETE", f"/{collection}/{one}" if one else f"/{collection}")
    console().print(
        f"cleared {len(cleared)} {what}(s)" + (f": {', '.join(r['id'] for r in cleared)}" if cleared else "")
    )


@app.command("faults")
def faults(state_dir: Path = STATE_DIR, fmt: Format = typer.Option(Format.table, "--format")) -> None:
    """Every fault injected since the twin started, with start and clear times."""
    log = _control(state_dir, "GET", "/faults")
    if fmt == Format.json:
        emit_json({"faults": log})
    else:
        _fault_table(log, "faults")


@app.command("record")
def record(
    seconds: float = typer.Option(..., "--seconds", help="How long to record."),
    output: Path = typer.Option(..., "--output", "-o", help="Trace file (JSON Lines, docs/formats.md format)."),
    state_dir: Path = STATE_DIR,
    interval: float = typer.Option(1.0, "--interval", help="Counter sample interval in seconds."),
    device: list[str] = typer.Option([], "--device", "-d", help="Only these switches (repeatable)."),
) -> None:
    """Record the twin's gNMI telemetry into a trace that `fabricd detect --trace` replays."""
    if not 0 < seconds <= 3600 or not 0.1 <= interval <= 60:
        raise LabError("--seconds must be in (0, 3600] and --interval in [0.1, 60]")
    if _pid(state_dir) is None:
        raise LabError(f"no twin running with state dir {state_dir}; start one with `fabricd lab up`")
    inventory = load_inventory(state_dir / "inventory.yaml")
    names = device or inventory.names
    unknown = [d for d in names if d not in inventory]
    if unknown:
        raise LabError(f"--device {', '.join(unknown)}: not a switch of the twin")
    lines, errors = record_trace([inventory.access(d) for d in names], seconds, interval, output)
    for e in errors:
        err_console().print(f"warning: {e}", markup=False)
    console().print(f"wrote {output}: {lines} updates from {len(names)} switches over {seconds:g} s")


# The run's numbers that are not the schedule's: how long a mark and a hold may disagree (fabricd's mark scan is 5 min
# by default: an hour is far past any reconcile), fabricd's own safety setting's range (safety.min_uplink_fraction),
# a seed (a negative one would replay its positive twin), and a pid (0 or a negative one would signal a whole process
# group; Linux's pid_max is at most 2^22).
_GRACE = (0.0, 3600.0, True)
_FRACTION = (0.0, 1.0, False)
_SEED = (0, 2**63 - 1, True)
_PID = (1, 2**22, True)


@app.command("chaos")
def chaos(
    spec: Path = typer.Option(..., "--spec", help="The fabric spec the twin (or your lab) was built from."),
    state_dir: Path = STATE_DIR,
    api: list[str] = typer.Option(
        ["http://127.0.0.1:8340"], "--api", help="fabricd's API; repeat for each instance of an HA pair (in order)."
    ),
    token_file: Path | None = typer.Option(
        None, "--token-file", help="A file holding an admin token (default: $FABRICD_API_TOKEN)."
    ),
    minutes: float = typer.Option(5.0, "--minutes", help="How long the schedule runs."),
    seed: int | None = typer.Option(None, "--seed", help="Replays the same schedule (default: a new one, printed)."),
    kinds: str | None = typer.Option(None, "--kinds", help="Fault kinds, comma-separated (default: every one)."),
    port: list[str] = typer.Option([], "--port", help="Link faults only on these ports (device:port; repeatable)."),
    faults_per_min: float = typer.Option(8.0, "--faults-per-min"),
    process_per_min: float = typer.Option(0.8, "--process-per-min"),
    operator_per_min: float = typer.Option(1.0, "--operator-per-min"),
    process: str | None = typer.Option(
        None,
        "--process",
        help="Process faults, comma-separated: kill, pause, gc_pause, twin_restart (default: all the run can do: "
        "kill needs --service-cmd, the pauses a service it started or --service-pid).",
    ),
    service_cmd: list[str] = typer.Option(
        [],
        "--service-cmd",
        help="Start fabricd with this command (and restart it after each kill -9); repeat for each HA instance.",
    ),
    service_pid: list[int] = typer.Option([], "--service-pid", help="A running fabricd to pause (not kill)."),
    collector_cmd: list[str] = typer.Option(
        [],
        "--collector-cmd",
        help="Start a `fabricd collector` with this command; killed, paused and restarted like the services; "
        "repeatable (telemetry.source: bus).",
    ),
    restart: list[str] = typer.Option(
        [],
        "--restart",
        help="NAME=COMMAND: a shell command that restarts a part (the bus, PostgreSQL, a collector); repeatable.",
    ),
    grace_s: float = typer.Option(10.0, "--grace", help="Seconds a mark and a hold may disagree (reconcile)."),
    min_uplink_fraction: float = typer.Option(0.75, "--min-uplink-fraction", help="fabricd's safety setting."),
    report: Path | None = typer.Option(None, "--report", help="Report folder (default STATE_DIR/chaos-SEED)."),
    smoke: bool = typer.Option(False, "--smoke", help="A 45 s schedule, dense, for CI (about 2 minutes)."),
    plan_only: bool = typer.Option(False, "--plan", help="Print the schedule and stop."),
    recheck: Path | None = typer.Option(
        None, "--recheck", help="Check a finished run's report folder again (its history.jsonl, run.json); no run."
    ),
    tuning_revert_in: float = typer.Option(
        300.0, "--tuning-revert-in", help="fabricd's tuning.revert_in_s: how long a resumed tuning push may wait."
    ),
    workload: list[str] = typer.Option(
        [],
        "--workload",
        help="A twin workload running the whole run: incast, alltoall, allreduce, dci-bulk "
        "(repeatable; for fabricd's tuning loop, tuning.mode auto in its fabricd.yaml; docs/lab.md).",
    ),
) -> None:
    """Faults, repairs, operators and process faults at once; then check fabricd's promises from the switches and
    its API (docs/lab.md, "Chaos"). Exit 1 names each violation with its time and the seed."""
    from lab.chaos.observe import Api, ChaosError, Switches, read_inventory
    from lab.chaos.runner import WORKLOADS, Runner, Target
    from lab.chaos.schedule import (
        FAULT_KINDS,
        ChaosOptions,
        ScheduleError,
        check_without_fabric,
        make_schedule,
        out_of_range,
    )
    from topology.blueprint import generate_blueprint
    from topology.fabric import Fabric

    unknown = [w for w in workload if w not in WORKLOADS]
    if unknown:
        raise ChaosError(f"--workload {', '.join(unknown)}: unknown; use {', '.join(WORKLOADS)}")
    # every number first, before anything is loaded or made of it (a schedule's own: lab/chaos/schedule.py BOUNDS)
    for option, value, bounds in (
        ("grace", grace_s, _GRACE), ("min_uplink_fraction", min_uplink_fraction, _FRACTION),
        ("seed", seed if seed is not None else 0, _SEED), *(("service_pid", pid, _PID) for pid in service_pid),
    ):  # fmt: skip
        if problem := out_of_range(option, value, bounds):
            raise ChaosError(problem)
    possible = ["twin_restart"] + (["pause", "gc_pause"] if service_cmd or service_pid or collector_cmd else [])
    possible += ["kill"] if service_cmd or collector_cmd else []
    possible += ["restart"] if restart else []
    restarts = dict(r.split("=", 1) for r in restart if "=" in r)
    if len(restarts) != len(restart) or not all(restarts.values()):
        raise ChaosError("--restart: give NAME=COMMAND, e.g. bus='fabricd bus down --dir D; fabricd bus up --dir D'")
    procs = tuple(x.strip() for x in process.split(",") if x.strip()) if process is not None else tuple(possible)
    if process is not None and not procs:
        raise ChaosError("--process names no process fault: use some of kill, pause, gc_pause, twin_restart, restart "
                         "(or --process-per-min 0 for none)")  # fmt: skip
    unable = [p for p in procs if p in ("kill", "pause", "gc_pause", "restart") and p not in possible]
    if unable:
        raise ChaosError(
            f"--process {', '.join(unable)}: needs --service-cmd (kill), --service-pid (pauses) or --restart (restart)"
        )
    opts = ChaosOptions(
        minutes=0.75 if smoke else minutes,
        kinds=tuple(k.strip() for k in kinds.split(",") if k.strip()) if kinds is not None else FAULT_KINDS,
        faults_per_min=16.0 if smoke else faults_per_min,
        process_per_min=4.0 if smoke else process_per_min,
        operator_per_min=4.0 if smoke else operator_per_min,
        process_kinds=procs,
        ports=tuple(port),
    )
    try:
        check_without_fabric(opts)
    except ScheduleError as e:
        raise ChaosError(str(e)) from None

    fabric_spec = load_spec(spec)
    facts = FabricFacts.of(Fabric(generate_blueprint(fabric_spec)), fabric_spec.name)
    if recheck is not None:
        try:
            run, limits = load_run(recheck)
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise ChaosError(f"--recheck {recheck}: not a chaos report folder ({e})") from None
        _judge(run, facts, limits, grace_s, recheck)
        return
    if seed is None:
        seed = int.from_bytes(os.urandom(3), "big")
    try:
        schedule = make_schedule(seed, facts, opts)
    except ScheduleError as e:
        raise ChaosError(str(e)) from None
    if plan_only:
        for step in schedule.steps:
            console().print(step.line(), markup=False, highlight=False)
        return
    token = os.environ.get("FABRICD_API_TOKEN")
    if token_file is not None:
        try:
            token = token_file.read_text().strip()
        except OSError as e:
            raise ChaosError(f"--token-file {token_file}: {e}") from None
    if not token:
        raise ChaosError("no API token: set FABRICD_API_TOKEN or give --token-file (an admin token)")
    control_client.call(state_dir, "GET", "/status", timeout_s=5)  # no twin: one line, exit 2
    client = Api(api, token)
    if len(service_cmd) > 1 and len(api) != len(service_cmd):
        raise ChaosError(f"{len(service_cmd)} --service-cmd need as many --api, in the same order (got {len(api)})")
    if not service_cmd and not client.reachable():
        raise ChaosError(f"no fabricd answers at {', '.join(api)}: start it (`fabricd run`) or give --service-cmd")
    out = report or state_dir / f"chaos-{seed}"
    out.mkdir(parents=True, exist_ok=True)
    switches = Switches(read_inventory(state_dir / "inventory.yaml"), facts)
    target = Target(
        state_dir, spec, client, switches, list(service_cmd), list(service_pid), out / "fabricd.log", restarts,
        list(collector_cmd), list(workload),
    )  # fmt: skip
    steps = len(schedule.steps)
    console().print(f"chaos on {facts.name}, seed {seed}: {steps} steps over {opts.minutes:g} min; report in {out}")
    if switches.not_read:
        not_read = ", ".join(switches.not_read)
        err_console().print(f"warning: not read (neither EOS nor SONiC in the inventory): {not_read}", markup=False)
    runner = Runner(schedule, facts, target, lambda line: console().print(line, markup=False, highlight=False))
    try:
        run = runner.execute(out / "history.jsonl")
        limits = dataclasses.replace(client.limits(min_uplink_fraction), tuning_revert_s=tuning_revert_in)
    finally:
        runner.stop_service()
        switches.close()
        client.close()
    (out / "schedule.txt").write_text("\n".join(s.line() for s in schedule.steps) + "\n")
    (out / "run.json").write_text(json.dumps(run_doc(run, limits)))
    _judge(run, facts, limits, grace_s, out)


def _judge(run: Run, facts: FabricFacts, limits: Limits, grace_s: float, out: Path) -> None:
    """Check a run, write report.md and timeline.png into `out`, print the report; exit 1 on any violation."""
    from lab.chaos import report as rep
    from lab.chaos.detection import detection
    from lab.chaos.invariants import check

    violations = check(run, facts, limits, grace_s)
    scores, precision, _ = detection(run, facts)
    text = rep.markdown(run, violations, scores, precision, facts.name)
    (out / "report.md").write_text(text)
    rep.timeline(run, facts, out / "timeline.png")
    console().print(text, markup=False, highlight=False)
    if violations:
        seed = run.seed
        err_console().print(f"{len(violations)} violation(s), seed {seed}; replay with --seed {seed}", markup=False)
        raise typer.Exit(1)


workload_app = typer.Typer(
    help="Traffic patterns over the twin's steady traffic (docs/lab.md, Workloads): incast, alltoall, allreduce, "
    "dci-bulk; the congestion model answers with marks, pauses and throttled rates."
)
app.add_typer(workload_app, name="workload")


def _phases(on_ms: float | None, off_ms: float | None, message_kb: float | None) -> dict[str, Any]:
    given = {"on_ms": on_ms, "off_ms": off_ms, "message_kb": message_kb}
    return {k: v for k, v in given.items() if v is not None}


ON_MS = typer.Option(None, "--on-ms", help="Collective phase: ms of sending (default 100).")
OFF_MS = typer.Option(None, "--off-ms", help="Collective phase: ms of silence between sends (default 0: always on).")
MESSAGE_KB = typer.Option(None, "--message-kb", help="Message size in KB (default 1024).")


def _start(state_dir: Path, kind: str, params: dict[str, Any], fmt: Format) -> None:
    record = _control(state_dir, "POST", "/workloads", {"kind": kind, "params": params})
    if fmt == Format.json:
        emit_json(record)
    else:
        console().print(f"started {record['id']}: {kind}, {len(record['senders'])} sender(s)")


@workload_app.command("incast")
def workload_incast(
    port: str = typer.Option(..., "--port", help="switch:port facing the NIC everyone sends to."),
    fan_in: int = typer.Option(8, "--fan-in", help="How many NICs send to it (same rail)."),
    state_dir: Path = STATE_DIR,
    on_ms: float | None = ON_MS,
    off_ms: float | None = OFF_MS,
    message_kb: float | None = MESSAGE_KB,
    fmt: Format = typer.Option(Format.table, "--format"),
) -> None:
    """N NICs send at line rate to one NIC."""
    _start(state_dir, "incast", {"port": port, "fan_in": fan_in, **_phases(on_ms, off_ms, message_kb)}, fmt)


@workload_app.command("alltoall")
def workload_alltoall(
    rail: int = typer.Option(..., "--rail", help="Rail whose NICs all send to each other."),
    state_dir: Path = STATE_DIR,
    on_ms: float | None = ON_MS,
    off_ms: float | None = OFF_MS,
    message_kb: float | None = MESSAGE_KB,
    fmt: Format = typer.Option(Format.table, "--format"),
) -> None:
    """Every NIC of a rail sends to every other one, evenly, at line rate in total."""
    _start(state_dir, "alltoall", {"rail": rail, **_phases(on_ms, off_ms, message_kb)}, fmt)


@workload_app.command("allreduce")
def workload_allreduce(
    group: str = typer.Option(..., "--group", help="Aggregation group(s), comma-separated: the ring's servers."),
    state_dir: Path = STATE_DIR,
    on_ms: float | None = ON_MS,
    off_ms: float | None = OFF_MS,
    message_kb: float | None = MESSAGE_KB,
    fmt: Format = typer.Option(Format.table, "--format"),
) -> None:
    """A ring per rail over the groups' servers, each NIC sending to the next at line rate."""
    _start(state_dir, "allreduce", {"group": group, **_phases(on_ms, off_ms, message_kb)}, fmt)


@workload_app.command("dci-bulk")
def workload_dci_bulk(
    dci: str | None = typer.Option(None, "--dci", help="The far campus (default: the first)."),
    senders: int = typer.Option(4, "--senders", help="How many NICs send across it at line rate."),
    state_dir: Path = STATE_DIR,
    on_ms: float | None = ON_MS,
    off_ms: float | None = OFF_MS,
    message_kb: float | None = MESSAGE_KB,
    fmt: Format = typer.Option(Format.table, "--format"),
) -> None:
    """Bulk transfer to the far campus over the DCI's long-haul ports."""
    params: dict[str, Any] = {"senders": senders, **_phases(on_ms, off_ms, message_kb)}
    if dci is not None:
        params["dci"] = dci
    _start(state_dir, "dci-bulk", params, fmt)


@workload_app.command("clear")
def workload_clear(
    workload_id: str | None = typer.Argument(None, help="Workload id (default: every active workload)."),
    state_dir: Path = STATE_DIR,
) -> None:
    """Stop one workload or all of them."""
    _clear(state_dir, "workloads", "workload", workload_id)


@workload_app.command("list")
def workload_list(state_dir: Path = STATE_DIR, fmt: Format = typer.Option(Format.table, "--format")) -> None:
    """Every workload started since the twin started, and the queues the congestion model holds congested."""
    log = _control(state_dir, "GET", "/workloads")
    state = _control(state_dir, "GET", "/congestion")
    if fmt == Format.json:
        emit_json({"workloads": log, "congestion": state})
        return
    table = Table(title="workloads")
    for col in ("id", "kind", "params", "senders", "start", "cleared"):
        table.add_column(col)
    for r in log:
        params = " ".join(f"{k}={v}" for k, v in r["params"].items())
        start = time.strftime("%H:%M:%S", time.localtime(r["start_ts"] / 1e9))
        cleared = time.strftime("%H:%M:%S", time.localtime(r["cleared_ts"] / 1e9)) if r["cleared_ts"] else ""
        table.add_row(r["id"], r["kind"], params, str(len(r["senders"])), start, cleared)
    console().print(table)
    queues = Table(title="congested queues (lossless class)")
    for col in ("queue", "offered Gb/s", "served Gb/s", "marked", "queue KB", "watermark KB", "paused", "drops Gb/s"):
        queues.add_column(col)
    for q in state["queues"]:
        queues.add_row(
            f"{q['device']}:{q['port']}",
            f"{q['offered_bps'] / 1e9:.0f}",
            f"{q['served_bps'] / 1e9:.0f}",
            f"{q['mark_share']:.2%}",
            f"{q['queue_mean_bytes'] / 1e3:.0f}",
            f"{q['queue_max_bytes'] / 1e3:.0f}",
            f"{max(q['paused'], default=0):.1%}",
            f"{q['dropped_bps'] / 1e9:.2f}",
        )
    console().print(queues)
