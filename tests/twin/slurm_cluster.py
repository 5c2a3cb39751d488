"""A real one-host Slurm for the tests (Debian's packages: slurmctld, slurmd, slurmrestd, munge, slurm-client,
slurm-wlm-jwt-plugin): munged, slurmctld with fabricd's topology.conf, a slurmd for each of a few fabric servers, run
under its name (`slurmd -N`, each on its own port: Debian's build runs several on one host), slurmrestd taking JWTs
(`scontrol token`). Everything lives in one temp folder with its own slurm.conf on free loopback ports; `stop()`
cancels the jobs and kills every process it started, job steps included (each carries a marker in its environment,
so nothing of another Slurm is touched).

Where Slurm is not installed, or not as root, `missing()` says why in one line and the tests skip; in CI
(FABRICD_REQUIRE_SLURM=1, set by .ci/run, which installs the packages) they fail instead.
"""

from __future__ import annotations

import contextlib
import functools
import glob
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.conftest import free_port
from topology.exports.hostlist import compress_hostlist

REQUIRED = os.environ.get("FABRICD_REQUIRE_SLURM") == "1"  # CI: Slurm is installed, a skip would hide a failure
PACKAGES = "slurmctld slurmd slurmrestd slurm-client munge slurm-wlm-jwt-plugin"
TOOLS = ("munged", "slurmctld", "slurmd", "slurmrestd", "scontrol", "sbatch", "squeue", "scancel")
MARKER = "FABRICD_SLURM_TWIN"  # in the environment of every process the cluster starts, jobs included
START_S = 30.0
# where Debian (slurm-wlm), Slurm's own RPMs and a source build put the plugins
PLUGIN_DIRS = ("/usr/lib/*/slurm-wlm", "/usr/lib/*/slurm", "/usr/lib64/slurm", "/usr/local/lib/slurm")


class SlurmStartError(RuntimeError):
    """A daemon did not come up; the message carries the end of its log."""


def missing() -> str | None:
    """Why a real Slurm cannot run here, in one line; None when it can."""
    if os.geteuid() != 0:
        return "a real Slurm in the tests needs root (slurmd launches the jobs): run as root"
    gone = [t for t in TOOLS if shutil.which(t) is None]  # the daemons are in /usr/sbin: on root's PATH
    if not any(glob.glob(f"{d}/auth_jwt.so") for d in PLUGIN_DIRS):  # noqa: PTH207  # a pattern with a root
        gone.append("auth_jwt.so")
    if gone:
        return f"no Slurm here: {', '.join(gone)} not found (apt-get install {PACKAGES})"
    return None


def need_slurm() -> None:
    """Skip the test, in one line, where Slurm cannot run; fail it instead in CI (FABRICD_REQUIRE_SLURM=1)."""
    why = missing()
    if why is not None:
        if REQUIRED:
            pytest.fail(f"FABRICD_REQUIRE_SLURM=1 but {why}")
        pytest.skip(why)


@contextmanager
def started(
    nodes: Sequence[str], topology: str, running: Sequence[str] = (), rest: bool = False
) -> Iterator[SlurmCluster]:
    """A running cluster for a `with` block (a module-scoped fixture wraps it), stopped after it. Where Slurm is
    missing or will not start the test skips with one line, except in CI (FABRICD_REQUIRE_SLURM=1): there it fails."""
    need_slurm()
    cluster = SlurmCluster(nodes, topology, running, rest)
    try:
        cluster.start()
    except SlurmStartError as e:
        if REQUIRED:
            raise
        pytest.skip(f"Slurm did not start here: {e}")
    try:
        yield cluster
    finally:
        cluster.stop()


def slurm_version() -> str:
    """slurmctld's release, e.g. 22.05.8 (the clients want a slurm.conf even for --version; the daemon does not)."""
    if shutil.which("slurmctld") is None:
        return "unknown"
    done = subprocess.run(["slurmctld", "-V"], capture_output=True, text=True, check=False, timeout=10)
    return done.stdout.split()[-1] if done.returncode == 0 and done.stdout.split() else "unknown"


class SlurmCluster:
    """One slurmctld (a slurmd per `running` node, slurmrestd if asked) for `nodes`, `topology` its topology.conf."""

    def __init__(self, nodes: Sequence[str], topology: str, running: Sequence[str] = (), rest: bool = False) -> None:
        if set(running) - set(nodes):
            raise ValueError(f"{sorted(set(running) - set(nodes))} not among the nodes")
        self.nodes, self.running, self.rest = list(nodes), list(running), rest
        self.slurmd_ports = {n: free_port() for n in running}  # one slurmd per node on this host, each its port
        # not pytest's tmp_path: slurmrestd drops to nobody, who must read slurm.conf and reach munge's socket
        self.root = Path(tempfile.mkdtemp(prefix="fabricd-slurm-"))
        self.root.chmod(0o755)
        self.conf = self.root / "slurm.conf"
        self.ctld_port, self.slurmd_port, self.rest_port = free_port(), free_port(), free_port()
        self.rest_url = f"http://127.0.0.1:{self.rest_port}"
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM")}
        self.env |= {"SLURM_CONF": str(self.conf), MARKER: str(self.root)}
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        (self.root / "topology.conf").write_text(topology)

    # --- lifecycle -------------------------------------------------------------------------------------------
    def start(self) -> SlurmCluster:
        try:
            self._write_config()
            self._munged()
            self._spawn("slurmctld", ["slurmctld", "-D", "-c"])
            self._wait("slurmctld", lambda: self.run("scontrol", "ping", check=False).stdout.count("UP") > 0)
            for node in self.running:
                (self.root / "spool" / node).mkdir(parents=True)
                self._spawn(f"slurmd-{node}", ["slurmd", "-D", "-N", node])
            for node in self.running:
                self._wait(f"slurmd-{node}", functools.partial(self.is_idle, node))
            if self.rest:
                # SLURM_JWT=daemon: slurmrestd passes each request's token on to slurmctld; only the v0.0.38 plugin,
                # as the dbv0.0.38 one needs a slurmdbd
                env = self.env | {"SLURM_JWT": "daemon"}
                self._spawn("slurmrestd", ["slurmrestd", "-a", "rest_auth/jwt", "-s", "openapi/v0.0.38", "-u",
                                           "nobody", f"127.0.0.1:{self.rest_port}"], env)  # fmt: skip
                self._wait("slurmrestd", lambda: _listening(self.rest_port))
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Cancel every job, stop the daemons, kill whatever of ours is left (job steps too), remove the folder."""
        if "slurmctld" in self.procs and self.procs["slurmctld"].poll() is None:
            self.run("scancel", "--full", "--quiet", "--user", "root", check=False)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and self.run("squeue", "-h", check=False).stdout.strip():
                time.sleep(0.2)
        for name in reversed(list(self.procs)):
            _end(self.procs[name])
        for pid in _marked(str(self.root)):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        shutil.rmtree(self.root, ignore_errors=True)

    # --- use -------------------------------------------------------------------------------------------------
    def run(self, *cmd: str, check: bool = True, timeout: float = 20) -> subprocess.CompletedProcess[str]:
        """A Slurm client command against this cluster."""
        done = subprocess.run(cmd, env=self.env, capture_output=True, text=True, timeout=timeout, check=False,
                              cwd=self.root)  # fmt: skip
        if check and done.returncode:
            raise AssertionError(f"{' '.join(cmd)} exited {done.returncode}: {done.stderr.strip()}")
        return done

    def node_state(self, node: str) -> str:
        return self.run("sinfo", "-h", "-n", node, "-o", "%t", check=False).stdout.strip()

    def is_idle(self, node: str) -> bool:
        return self.node_state(node) == "idle"

    def token(self, user: str = "root", lifespan_s: int = 600) -> str:
        out = self.run("scontrol", "token", f"username={user}", f"lifespan={lifespan_s}").stdout.strip()
        return out.partition("SLURM_JWT=")[2]

    def submit(self, name: str, *args: str) -> str:
        """sbatch a job that sleeps; its id."""
        out = self.run("sbatch", "--parsable", "-J", name, "-o", "/dev/null", *args, "--wrap", "sleep 300")
        return out.stdout.strip().split(";")[0]

    def job_state(self, job_id: str) -> str:
        return self.run("squeue", "-h", "-j", job_id, "-o", "%T", check=False).stdout.strip()

    def log(self, name: str, lines: int = 15) -> str:
        path = self.root / "log" / f"{name}.log"
        text = path.read_text(errors="replace") if path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    # --- internals -------------------------------------------------------------------------------------------
    def _write_config(self) -> None:
        for d in ("state", "spool", "log", "munge", "munge-key"):
            (self.root / d).mkdir()
        (self.root / "munge-key").chmod(0o700)
        jwt = self.root / "jwt.key"
        jwt.write_bytes(os.urandom(32))
        jwt.chmod(0o600)
        r = self.root
        host = socket.gethostname().split(".")[0]
        idle = [n for n in self.nodes if n not in self.running]
        # State=FUTURE: defined (so topology.conf may name them) but not expected to answer; one CPU each, as the
        # config says (config_overrides), so a slurmd is never drained for holding fewer than it reports
        node_lines = []
        for n in self.running:
            node_lines.append(f"NodeName={n} NodeAddr=127.0.0.1 NodeHostname={host} Port={self.slurmd_ports[n]} "
                              "CPUs=1 State=UNKNOWN")  # fmt: skip
        if idle:
            node_lines.append(f"NodeName={compress_hostlist(idle)} NodeAddr=127.0.0.1 CPUs=1 State=FUTURE")
        self.conf.write_text(
            f"""\
ClusterName=fabricd
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={self.ctld_port}
SlurmdPort={self.slurmd_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={r}/munge/munge.socket
CredType=cred/munge
AuthAltTypes=auth/jwt
AuthAltParameters=jwt_key={jwt}
StateSaveLocation={r}/state
SlurmdSpoolDir={r}/spool/%n
SlurmctldPidFile={r}/slurmctld.pid
SlurmdPidFile={r}/slurmd-%n.pid
SlurmctldLogFile={r}/log/slurmctld.log
SlurmdLogFile={r}/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/linear
SchedulerType=sched/builtin
ReturnToService=2
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SlurmdParameters=config_overrides
MailProg=/bin/true
TopologyPlugin=topology/tree
{chr(10).join(node_lines)}
PartitionName=gpu Nodes=ALL Default=YES MaxTime=INFINITE State=UP
"""
        )

    def _munged(self) -> None:
        key = self.root / "munge-key" / "munge.key"
        self.run("mungekey", "--create", f"--keyfile={key}")
        m = self.root / "munge"
        self._spawn("munged", ["munged", "--foreground", "--force", f"--socket={m}/munge.socket", f"--key-file={key}",
                               f"--pid-file={m}/munged.pid", f"--log-file={self.root}/log/munged.log",
                               f"--seed-file={m}/seed"])  # fmt: skip
        self._wait("munged", lambda: (m / "munge.socket").exists())

    def _spawn(self, name: str, cmd: list[str], env: dict[str, str] | None = None) -> None:
        out = (self.root / "log" / f"{name}.out").open("wb")
        self.procs[name] = subprocess.Popen(
            cmd, env=env or self.env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True, cwd=self.root,
        )  # fmt: skip

    def _wait(self, name: str, ready: Callable[[], bool]) -> None:
        deadline = time.monotonic() + START_S
        while not ready():
            proc = self.procs[name]
            if proc.poll() is not None or time.monotonic() > deadline:
                why = f"exited {proc.returncode}" if proc.returncode is not None else f"not ready in {START_S:.0f} s"
                out = (self.root / "log" / f"{name}.out").read_text(errors="replace").strip().splitlines()
                errors = [ln for ln in out + self.log(name).splitlines() if "fatal" in ln or "error" in ln.lower()]
                raise SlurmStartError(f"{name} {why}: {(errors or out or ['no output'])[-1].strip()}")
            time.sleep(0.1)


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def _end(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM the process group, SIGKILL what is left after 5 s."""
    for sig, wait_s in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(wait_s)
            return
        except subprocess.TimeoutExpired:
            continue


def _marked(root: str) -> list[int]:
    """Processes whose environment carries this cluster's marker (job steps forked off by slurmd, the jobs)."""
    needle = f"{MARKER}={root}".encode()
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            if needle in (proc / "environ").read_bytes().split(b"\0"):
                found.append(int(proc.name))
        except OSError:
            continue
    return found
