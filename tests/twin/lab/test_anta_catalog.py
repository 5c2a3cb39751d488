"""An operator's broad ANTA catalog (anta_catalog.py: every module that applies to a fixed-config data-center switch)
run unmodified over a leaf, a spine, a superspine and a DR switch of the small-dci twin: no test errors (every command
answers in the shape ANTA reads), every failure is one the twin's configured state explains, and once the operator
config a real fabric has is applied (time, SNMP, syslog, DNS, entropy, queue monitoring), at least 80 % succeed."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml

from drivers.inventory import load_inventory
from tests.conftest import EXAMPLES
from tests.twin.lab.anta_catalog import OPERATOR_CONFIG, ROLES, catalog
from tests.twin.lab.twin_thread import TwinThread
from topology.load import load_fabric
from topology.spec import load_spec

pytestmark = [pytest.mark.slow]
Results = dict[tuple[str, str], tuple[str, list[str]]]
# Failures the twin's configured state explains before the operator's config: what is not configured fails as
# not configured (test -> the words ANTA uses).
UNCONFIGURED = {
    "VerifyDNSServers": "Not configured", "VerifyErrdisableRecovery": "Invalid status",
    "VerifyHardwareEntropy": "Hardware entropy generation is disabled", "VerifyBannerLogin": "not configured",
    "VerifyLoggingPersistent": "Persistent logging is disabled", "VerifyLoggingSourceIntf": "Not configured",
    "VerifyLoggingHosts": "are not configured", "VerifyLoggingTimestamp": "appropriate timestamp format",
    "VerifySnmpStatus": "SNMP agent disabled", "VerifySnmpLocation": "not configured",
    "VerifySnmpContact": "not configured", "VerifyNTP": "NTP status mismatch",
    "VerifySSHStatus": "SSHD status for Default VRF is enabled", "VerifyNTPAssociations": "No NTP peers configured",
    "VerifyRunningConfigLines": "patterns were not found", "VerifyLANZ": "LANZ is not enabled",
}  # fmt: skip
# With the operator's config: still failing for reasons of the lab (no login banner configured, SSH serves netmiko)
STILL_FAILING = {"VerifyBannerLogin", "VerifySSHStatus"}


@pytest.fixture(scope="module")
def twin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TwinThread]:
    t = TwinThread(load_spec(EXAMPLES / "small-dci.yaml"), tmp_path_factory.mktemp("anta-catalog")).start()
    yield t
    t.stop()


def nrfu(twin: TwinThread, tmp: Path) -> Results:
    inv = load_inventory(twin.inventory)
    hosts = [{"host": inv.access(n).host, "name": n, "port": inv.access(n).eapi.port, "tags": [n]} for n in ROLES]
    (tmp / "inventory.yml").write_text(yaml.safe_dump({"anta_inventory": {"hosts": hosts}}))
    (tmp / "catalog.yml").write_text(yaml.safe_dump(catalog(load_fabric(EXAMPLES / "small-dci.yaml", None)[1])))
    password = inv.access(ROLES[0]).password.get_secret_value()
    run = subprocess.run(
        [str(Path(sys.executable).parent / "anta"), "nrfu", "-u", "admin", "-p", password, "-i",
         str(tmp / "inventory.yml"), "-c", str(tmp / "catalog.yml"), "--insecure", "json", "-o",
         str(tmp / "results.json")],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert (tmp / "results.json").exists(), run.stdout[-3000:] + run.stderr[-3000:]
    rows = json.loads((tmp / "results.json").read_text())
    out: Results = {}
    for r in rows:
        key = (r["name"], r["test"])
        old = out.get(key)
        status = (
            r["result"] if old is None or old[0] == "success" else old[0]
        )  # a test run twice (tags) keeps the worst
        out[key] = (status, (old[1] if old else []) + (r.get("messages") or []))
    return out


def configure(twin: TwinThread, name: str, lines: list[str]) -> None:
    a = load_inventory(twin.inventory).access(name)
    cmds = ["enable", "configure session operator", *lines, "commit", "write memory"]
    body = {"jsonrpc": "2.0", "method": "runCmds", "id": 1, "params": {"version": 1, "cmds": cmds}}
    r = httpx.post(f"https://{a.host}:{a.eapi.port}/command-api", json=body, verify=False,
                   auth=(a.username, a.password.get_secret_value()), timeout=30)  # fmt: skip
    assert "error" not in r.json(), r.json()


def summary(results: Results) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(Counter(s for s, _ in results.values()).items()))


def test_a_broad_catalog_errors_nowhere_and_passes_once_the_fabric_is_configured(
    twin: TwinThread, tmp_path: Path
) -> None:
    time.sleep(max(0.0, 1.5 - (time.monotonic() - twin.started)))  # VerifyUptime wants a second of uptime
    before = nrfu(twin, tmp_path)
    assert {d for d, _ in before} == set(ROLES)
    errors = {k: m for k, (s, m) in before.items() if s == "error"}
    assert errors == {}, errors
    unexplained = {
        k: m for k, (s, m) in before.items()
        if s == "failure" and not (k[1] in UNCONFIGURED and any(UNCONFIGURED[k[1]] in x for x in m))
    }  # fmt: skip
    assert unexplained == {}, "\n".join(f"{k}: {m}" for k, m in sorted(unexplained.items()))
    for name in ROLES:
        configure(twin, name, OPERATOR_CONFIG)
    after = nrfu(twin, tmp_path)
    counts = Counter(s for s, _ in after.values())
    assert counts["error"] == 0, {k: m for k, (s, m) in after.items() if s == "error"}
    failing = {k: m for k, (s, m) in after.items() if s == "failure"}
    assert {t for _, t in failing} <= STILL_FAILING, failing
    share = counts["success"] / len(after)
    print(f"ANTA on {len(ROLES)} switches: before {summary(before)}; after {summary(after)} ({share:.1%} success)")
    assert share >= 0.8, summary(after)
