"""`fabricd.yaml`: what the service watches, how it may act, where it keeps state and how it is reached.

Every key has a safe default (observe mode, small disable budgets, API on localhost). Environment variables
override the file: `FABRICD_REMEDIATION__MODE=auto` sets `remediation.mode` (`__` separates levels).
Secrets are never values in the file: `*_env` names an environment variable, `*_file` a 0600 file.
"""

from __future__ import annotations

import ipaddress
import os
import shlex
import stat
import typing
import urllib.parse
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

from fabricd.detectors.runner import PASS_GAP_S
from fabricd.telemetry.paths import SAMPLE_GROUPS
from topology.errors import InputError
from topology.sourcefile import load_document, load_model

ENV_PREFIX = "FABRICD_"


class ConfigError(InputError):
    """fabricd.yaml is invalid or a secret it points to cannot be read."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)  # NaN passes every bound check


class SecretRef(_Strict):
    """Where a secret comes from: an environment variable or a file only its owner can read."""

    env: str | None = None
    file: Path | None = None


def max_workers() -> int:
    """More telemetry worker processes than 4 per core only adds context switches (and 100-180 MB of RSS each)."""
    return 4 * (os.cpu_count() or 1)


class TelemetrySettings(_Strict):
    interval_s: float = Field(1.0, gt=0, le=300)  # counter sample interval; stale after 3 of them
    # Groups sampled apart from interval_s (never faster: it is the staleness unit), e.g. {optics: 30, fec: 10}.
    intervals: dict[str, float] = Field(default_factory=dict)
    record: Path | None = None  # also write the stream to this JSON Lines trace
    # Processes that stream and decode gNMI, each for the switches in its hash range (1: in the service process;
    # plan ~150k updates/s there, ~250k per worker core: docs/telemetry-scale-out.md).
    workers: int = Field(1, ge=1)
    # direct: this process subscribes to every switch; bus: `fabricd collector` processes do, and publish to the
    # stream this process reads (docs/ha.md, "Collectors")
    source: Literal["direct", "bus"] = "direct"
    stream_max_age_s: float = Field(120.0, ge=5, le=86400)  # the stream keeps this much; a slower reader loses
    stream_max_bytes: int = Field(1 << 30, ge=1 << 20)  # and at most this many bytes
    # A dead collector's switches move this long after its last renewal was seen, then the new stream's first sample:
    # a gap of p99 1.94-1.97 s at 0.6 s and a 0.97 s sample interval, 2.25 s at 1 s (bench/bench_scaleout.py,
    # docs/benchmarks.md). Each collector renews its leases every third of it, ~1 s per 16k (bench_leases.py): one
    # holding more than ~3k switches wants a longer TTL.
    collector_lease_ttl_s: float = Field(0.6, ge=0.5, le=120.0)
    # Send each switch's SAMPLE subscription in its own slot of the interval, so switches that start their sample
    # timer with the subscription do not all burst at once (lag); false subscribes at connect.
    spread_samples: bool = True
    # A synced SONiC switch with BGP sessions planned that streams no STATE_DB NEIGH_STATE_TABLE row this long after
    # its sync (FRR in unified or split mode: bgpmon writes nothing) is read over SSH, `vtysh -c 'show bgp summary
    # json'`, every bgp_ssh_interval_s (bgpmon's own 15 s: a session's change is as late as from STATE_DB)
    bgp_ssh_after_s: float = Field(30.0, ge=0, le=3600)
    bgp_ssh_interval_s: float = Field(15.0, ge=1, le=3600)

    @field_validator("workers")
    @classmethod
    def _workers_fit(cls, n: int) -> int:
        if n > max_workers():
            raise ValueError(
                f"at most {max_workers()} here ({os.cpu_count()} cores x 4); more than one per core rarely helps"
            )
        return n

    @field_validator("intervals")
    @classmethod
    def _known_groups(cls, intervals: dict[str, float]) -> dict[str, float]:
        for group, seconds in intervals.items():
            if group not in SAMPLE_GROUPS:
                raise ValueError(f"unknown sample group {group!r}; known: {', '.join(SAMPLE_GROUPS)}")
            if not 0 < seconds <= 300:
                raise ValueError(f"{group}: {seconds} s is not in (0, 300]")
        return intervals

    @model_validator(mode="after")
    def _not_faster_than_the_base(self) -> TelemetrySettings:
        fast = {g: v for g, v in self.intervals.items() if v < self.interval_s}
        if fast:
            raise ValueError(
                f"intervals {fast} are shorter than interval_s ({self.interval_s} s), the staleness unit; "
                "lower interval_s instead"
            )
        return self

    @model_validator(mode="after")
    def _record_in_process(self) -> TelemetrySettings:
        if self.record is not None and self.workers > 1:
            raise ValueError("record needs workers: 1 (the trace is written by the process that decodes)")
        return self


class DciDetectorSettings(_Strict):
    """DR port monitoring (docs/dci.md): imbalance and drops of each DCI's ports, and the job shape the cost is
    quoted for."""

    window_s: float = Field(10.0, ge=2, le=600)
    raise_skew: float = Field(0.15, gt=0, le=2)
    clear_skew: float = Field(0.10, gt=0, le=2)
    hold_s: float = Field(5.0, ge=0, le=600)
    drop_rate: float = Field(1e-6, gt=0, le=1)
    job_params: float = Field(7e9, gt=0)
    job_gpus: int = Field(1024, ge=16)
    job_split: Literal["pp", "dp"] = "pp"

    @model_validator(mode="after")
    def _hysteresis(self) -> Self:
        if self.clear_skew > self.raise_skew:
            raise ValueError("clear_skew must not exceed raise_skew (hysteresis: clear below where it raises)")
        return self


class OpticsTrendSettings(_Strict):
    """Failure prediction (docs/jobs.md): where each signal fails (set them to the optics' data sheet: e.g. the
    receiver sensitivity of the module type, its high-temperature alarm) and how steep a trend must be to count."""

    horizon_h: float = Field(168.0, gt=0, le=24 * 90)
    threshold_dbm: float = Field(-7.0, ge=-30, le=5)
    ber_limit: float = Field(2.4e-4, gt=0, lt=1)
    temp_limit_c: float = Field(70.0, ge=30, le=120)
    min_slope_db_h: float = Field(0.1, gt=0)
    min_ber_decades_h: float = Field(0.05, gt=0)
    min_temp_c_h: float = Field(1.0, gt=0)


class DetectorSettings(_Strict):
    tick_s: float = Field(1.0, gt=0, le=300)  # every detector at least once per tick (normally the sample interval)
    # Between ticks, a pass soon after new counter samples land, at most this often (0: ticks only). Without it a
    # storm's first whole paused sample waits for the next tick: up to a tick of detection delay (issue #6). On
    # large fabrics the service spaces these passes further so they take at most ~10% of a core.
    pass_gap_s: float = Field(PASS_GAP_S, ge=0, le=60)  # the same default as `fabricd detect`
    retention_days: float = Field(30, gt=0)  # closed findings and audit rows older than this are pruned
    # local: this process runs the detectors; shards: `fabricd shard` processes do, each over a range of aggregation
    # groups, and this one merges their findings from the bus and acts on them (docs/telemetry-scale-out.md)
    source: Literal["local", "shards"] = "local"
    shards: int = Field(0, ge=0, le=1024)  # with source: shards, how many run (`fabricd shard --count`)
    dci: DciDetectorSettings = Field(default_factory=DciDetectorSettings)
    optics_trend: OpticsTrendSettings = Field(default_factory=OpticsTrendSettings)

    @model_validator(mode="after")
    def _shards_counted(self) -> DetectorSettings:
        if self.source == "shards" and self.shards < 1:
            raise ValueError("source: shards needs shards: N, the --count the `fabricd shard` processes run with")
        return self


def _service_url(url: str) -> str:
    """An http(s) URL without user:password@: a credential in the file would be a secret outside the env/0600 rules
    (and with a token as well, the URL's basic auth would silently replace it)."""
    parsed = urllib.parse.urlsplit(url)
    if parsed.username is not None or parsed.password is not None:
        raise ValueError("must not carry user:password@; put the credential in the token (env or 0600 file)")
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise ValueError("is not an http(s) URL; write it as https://host/path")
    return url


class SlurmRestSettings(_Strict):
    """slurmrestd (Slurm's REST API) with a JWT: GET {url}/slurm/{api_version}/jobs, the same job records as
    `squeue --json` (Slurm's OpenAPI reference, https://slurm.schedmd.com/rest_api.html)."""

    url: str
    user: str  # X-SLURM-USER-NAME: the user the token was issued for (`scontrol token username=...`)
    token: SecretRef  # X-SLURM-USER-TOKEN
    api_version: str = Field("v0.0.40", pattern=r"^v0\.0\.[0-9]+$")  # the data parser plugin slurmrestd loads
    verify: bool | Path = True  # TLS: a CA bundle file, or false for a lab's self-signed slurmrestd

    _url = field_validator("url")(_service_url)


class JobSettings(_Strict):
    """Where the training jobs come from (docs/jobs.md); the service re-reads them every refresh_s, and a bad read
    keeps the previous job map in force."""

    path: Path | None = None  # a jobs file, `squeue --json` or `kubectl get pods -o json` output
    command: list[str] | None = None  # or a command printing one of those, e.g. [squeue, --json]
    slurmrestd: SlurmRestSettings | None = None  # or Slurm's REST API
    job_label: str | None = None  # Kubernetes: the pod label naming the job (default: the Job controller's)
    refresh_s: float = Field(60.0, ge=1, le=86400)
    timeout_s: float = Field(20.0, gt=0, le=600)

    @model_validator(mode="after")
    def _one_source(self) -> Self:
        if sum((self.path is not None, bool(self.command), self.slurmrestd is not None)) > 1:
            raise ValueError("give one of path, command or slurmrestd")
        return self


class SafetyLimits(_Strict):
    # CorrOpt (SIGCOMM'17) disables a corrupting link only while the switch keeps its capacity target;
    # 75% of uplink capacity is its default and ours (../shared/reference/domain.md).
    min_uplink_fraction: float = Field(0.75, gt=0, le=1)
    max_down_per_switch: int = Field(2, ge=0)
    max_down_per_rail: int = Field(4, ge=0)
    max_down_fabric: int = Field(8, ge=0)
    max_actions_per_hour: int = Field(10, ge=0)


class MaintenanceSettings(_Strict):
    """Planned maintenance (drain, undrain; docs/operations.md "Planned maintenance")."""

    # a drained port sending less than this is quiet: LLDP and BGP keepalives remain after a shift (b/s)
    quiet_bps: float = Field(1e6, ge=0)
    shift_timeout_s: float = Field(60.0, gt=0, le=3600)  # the drained ports must fall quiet within this, else stop
    lldp_wait_s: float = Field(5.0, gt=0, le=300)  # an undrain waits this long for a port's LLDP neighbour
    # before traffic returns, the drained ports' error counters are watched this long and must not rise
    undrain_watch_s: float = Field(10.0, ge=0, le=3600)


class RemediationSettings(_Strict):
    mode: Literal["observe", "approve", "auto"] = "observe"
    kinds: list[Literal["link_flap", "link_corruption"]] = ["link_flap", "link_corruption"]
    revert_in_s: int = Field(120, ge=30, le=3600)  # the switch undoes our shutdown unless we confirm in time
    verify_timeout_s: float = Field(10.0, gt=0, le=300)
    probation_s: float = Field(3600.0, ge=0)  # after re-enable, a new flap disables again and reopens the ticket
    # Run for server-facing ports before they go down, e.g.
    # scontrol update nodename={node} state=drain reason="{reason}"
    drain_hook: str | None = None
    drain_timeout_s: float = Field(30.0, gt=0)
    # In auto mode, a port that carries a job with one of these priority labels (jobs.*) waits for approval
    # instead: a flap on a rank of the flagship run is a call for a person, not for fabricd.
    approve_for_priority: list[str] = []
    # How often every switch's marks are read again (drivers/marks.py; at start and on takeover too): a port down
    # with fabricd's mark and no record is adopted (fabricd/service/reconcile.py). Each pass also reconciles the
    # records with telemetry's admin states, which needs no scan.
    mark_scan_s: float = Field(300.0, ge=10)
    maintenance: MaintenanceSettings = MaintenanceSettings()

    @field_validator("drain_hook")
    @classmethod
    def _hook_template(cls, hook: str | None) -> str | None:
        """Refuse at start what would otherwise fail at the first drain (and leave that action half done)."""
        if hook:
            hint = "placeholders are {node}, {reason}, {device} and {port}; write literal braces as {{ }}"
            try:
                for arg in shlex.split(hook):
                    arg.format(node="", reason="", device="", port="")
            except KeyError as e:
                raise ValueError(f"unknown placeholder {{{e.args[0]}}}; " + hint) from None
            except (IndexError, AttributeError, ValueError) as e:
                raise ValueError(f"not a valid command template ({e}); " + hint) from None
        return hook


class WebhookSettings(_Strict):
    url: str
    token: SecretRef | None = None
    retries: int = Field(5, ge=0, le=20)
    timeout_s: float = Field(5.0, gt=0)

    _url = field_validator("url")(_service_url)


class JiraSettings(_Strict):
    url: str
    project: str
    username: str
    token: SecretRef
    issue_type: str = "Task"
    done_statuses: list[str] = ["Done", "Resolved", "Closed"]

    _url = field_validator("url")(_service_url)


class TicketSettings(_Strict):
    backend: Literal["sqlite", "webhook", "jira"] = "sqlite"
    webhook: WebhookSettings | None = None
    jira: JiraSettings | None = None
    sync_interval_s: float = Field(60.0, gt=0)


class TlsSettings(_Strict):
    cert: Path  # PEM certificate (chain) the API serves
    key: Path  # its private key: a 0600 file
    client_ca: Path | None = None  # with it, clients must present a certificate this CA signed (mutual TLS)


class TrustedProxySettings(_Strict):
    """SSO in front of fabricd: a reverse proxy that authenticates people and passes the user in a header. Only
    requests from `addresses` may carry it; from anywhere else the header is ignored."""

    addresses: list[str] = Field(min_length=1)  # the proxy's addresses or networks, e.g. [10.0.0.5, 10.1.0.0/24]
    user_header: str = "X-Forwarded-User"
    roles: dict[str, Literal["viewer", "operator", "admin"]] = Field(default_factory=dict)  # user -> role
    default_role: Literal["viewer", "operator", "admin"] | None = "viewer"  # None: users not in roles are refused

    @field_validator("addresses")
    @classmethod
    def _networks(cls, v: list[str]) -> list[str]:
        for a in v:
            try:
                ipaddress.ip_network(a, strict=False)
            except ValueError:
                raise ValueError(f"{a!r} is not an IP address or network") from None
        return v


class ApiSettings(_Strict):
    host: str = "127.0.0.1"
    port: int = Field(8340, ge=0, le=65535)  # 0 = any free port (tests)
    # The service token: an admin credential for automation and for the first `fabricd token create` over the API;
    # people get their own tokens (`fabricd token create --user U --role viewer|operator|admin`, docs/access.md).
    token: SecretRef | None = None
    anonymous_read: bool = False  # true: reads need no token (a lab); /metrics and /api/v1/health never do
    tls: TlsSettings | None = None
    allow_plain_http: bool = False  # plain HTTP on an address other than loopback needs this, said out loud
    max_list: int = Field(5000, ge=1, le=100_000)  # the largest `limit` a list endpoint takes
    trusted_proxy: TrustedProxySettings | None = None  # SSO: the user from a header, only from these addresses
    # /metrics also carries every port's counters and optics (fabricd_port_*: 19 series per port, ~700k at 16k
    # GPUs); false leaves them to another exporter
    port_metrics: bool = True


class StateSettings(_Strict):
    """Where the service keeps its state: a SQLite file (one node), or PostgreSQL that a leader and its standbys
    share (`url`, e.g. postgresql://fabricd@db1:5432/fabricd; the password from `password`, never in the URL)."""

    path: Path = Path("fabricd-state.db")
    url: str | None = None
    password: SecretRef | None = None

    @field_validator("url")
    @classmethod
    def _postgres_url(cls, v: str | None) -> str | None:
        if v is None:
            return v
        parts = urllib.parse.urlsplit(v)
        if parts.scheme not in ("postgresql", "postgres"):
            raise ValueError("must be a postgresql:// URL (leave it out for the SQLite file at state.path)")
        if parts.password:  # an empty one (user:@host) is no secret
            raise ValueError("carries a password; give it as state.password (env: or file:) instead")
        return v


class BusSettings(_Strict):
    """The NATS servers (JetStream): the leader lease (ha) and the telemetry stream (telemetry.source: bus);
    secrets from env or 0600 files as everywhere."""

    urls: list[str] = ["nats://127.0.0.1:4222"]
    user: str | None = None
    password: SecretRef | None = None
    token: SecretRef | None = None
    nkey_seed: Path | None = None  # a file (0600) holding this client's nkey seed (SU...), for nkey authentication
    ca_file: Path | None = None  # TLS (tls:// URLs) verified against this CA

    @field_validator("urls")
    @classmethod
    def _nats_urls(cls, v: list[str]) -> list[str]:
        if not v:
            raise ValueError("give at least one NATS URL (nats://host:4222)")
        for url in v:
            parts = urllib.parse.urlsplit(url)
            if parts.scheme not in ("nats", "tls") or not parts.hostname:
                raise ValueError(f"{url!r} is not a nats://host:port or tls://host:port URL")
            if parts.password is not None or parts.username is not None:
                raise ValueError(f"{_no_userinfo(url)} carries credentials; give bus.user and bus.password instead")
        return v


def _no_userinfo(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    return parts._replace(netloc=(parts.hostname or "") + (f":{parts.port}" if parts.port else "")).geturl()


class HaSettings(_Strict):
    """Hot standby: every instance on the same config watches the fabric; the one holding the lease acts."""

    enabled: bool = False
    instance: str | None = None  # this instance's name in the lease and the logs (default: host:pid)
    # The lease lives this long after the leader's last renewal (every third of it); a standby takes over within
    # it plus a twentieth of a second of polling. The leader stops acting a third of it before the lease can end.
    # 0.6 s: a dead or paused leader is replaced within a second (bench/bench_scaleout.py). Short leases are safe
    # only with the fencing (docs/ha.md): a leader stalled longer than the TTL (a long GC, a starved CPU) loses the
    # lease and is fenced off; a service whose event loop stalls that long wants a longer one.
    lease_ttl_s: float = Field(0.6, ge=0.5, le=60.0)
    bucket: str = Field("fabricd_leader", pattern=r"^[A-Za-z0-9_-]+$")
    # Before every switch call the leader's lease must still be certainly its own for this long (a call that takes
    # longer is what naming its transactions with the fencing token covers: docs/ha.md). At most a third of the TTL:
    # the lease is renewed every third and counted valid for two thirds, so at least a third is always left.
    switch_call_margin_s: float = Field(0.15, ge=0.0, le=20.0)

    @model_validator(mode="after")
    def _margin(self) -> HaSettings:
        if self.switch_call_margin_s > self.lease_ttl_s / 3:
            raise ValueError(f"switch_call_margin_s must be at most a third of lease_ttl_s ({self.lease_ttl_s / 3:g})")
        return self


def _loopback(host: str) -> bool:
    return host in ("localhost", "::1") or host.startswith("127.")


class ServiceConfig(_Strict):
    spec: Path
    cabling: Path | None = None
    inventory: Path
    policy: Path | None = None
    state: StateSettings = Field(default_factory=StateSettings)
    ha: HaSettings = Field(default_factory=HaSettings)
    bus: BusSettings = Field(default_factory=BusSettings)
    telemetry: TelemetrySettings = Field(default_factory=TelemetrySettings)
    detectors: DetectorSettings = Field(default_factory=DetectorSettings)
    jobs: JobSettings = Field(default_factory=JobSettings)
    remediation: RemediationSettings = Field(default_factory=RemediationSettings)
    safety: SafetyLimits = Field(default_factory=SafetyLimits)
    tickets: TicketSettings = Field(default_factory=TicketSettings)
    api: ApiSettings = Field(default_factory=ApiSettings)
    drift_interval_s: float = Field(900.0, gt=0)  # config drift check (plan against running)
    log_format: Literal["text", "json"] = "text"
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    source: Path | None = Field(None, exclude=True)

    @model_validator(mode="before")
    @classmethod
    def _state_as_path(cls, data: Any) -> Any:
        """`state: some/file.db` (the short form) is `state: {path: some/file.db}`."""
        if isinstance(data, dict) and isinstance(data.get("state"), str | Path):
            data = {**data, "state": {"path": data["state"]}}
        return data

    @model_validator(mode="after")
    def _ha_needs_shared_state(self) -> Self:
        if self.ha.enabled and self.state.url is None:
            raise ValueError(
                "ha.enabled needs state.url (PostgreSQL): the leader and its standbys share one state, and a "
                "SQLite file cannot be shared between machines"
            )
        return self


_PATH_FIELDS = ("spec", "cabling", "inventory", "policy")


def load_config(
    path: Path, environ: dict[str, str] | None = None, *, secrets: Callable[[str], bool] | None = None
) -> ServiceConfig:
    """Read fabricd.yaml, apply FABRICD_* overrides, resolve paths against the file's folder, check secrets (those
    `secrets` accepts by their field name, all by default: a tool that needs only some asks only for them)."""
    data = load_document(path, ConfigError)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(str(path), "fabricd.yaml must be a mapping (spec, inventory, remediation, ...)")
    overrides = _apply_env(data, os.environ if environ is None else environ, path)
    try:
        cfg = load_model(path, ServiceConfig, ConfigError, "fabricd.yaml", "spec, inventory, ...", data=data)
    except ConfigError as e:
        var = _override_of(e.field, overrides)
        if var is None:
            raise
        # The bad value is not in the file: name the variable, not a line of the file (and never the value).
        raise ConfigError(str(path), f"{e.problem} (set by environment variable {var})", field=e.field) from None
    base = path.parent
    updates: dict[str, Any] = {"source": path}
    for name in _PATH_FIELDS:
        value = getattr(cfg, name)
        if isinstance(value, Path) and not value.is_absolute():
            updates[name] = base / value
    if not cfg.state.path.is_absolute():
        updates["state"] = cfg.state.model_copy(update={"path": base / cfg.state.path})
    if cfg.telemetry.record is not None and not cfg.telemetry.record.is_absolute():
        updates["telemetry"] = cfg.telemetry.model_copy(update={"record": base / cfg.telemetry.record})
    if cfg.jobs.path is not None and not cfg.jobs.path.is_absolute():
        updates["jobs"] = cfg.jobs.model_copy(update={"path": base / cfg.jobs.path})
    if cfg.api.tls is not None:
        tls = cfg.api.tls
        resolved = {k: (v if v is None or v.is_absolute() else base / v) for k, v in tls.model_dump().items()}
        updates["api"] = cfg.api.model_copy(update={"tls": TlsSettings(**resolved)})
    cfg = cfg.model_copy(update=updates)
    _check_api(cfg, path)
    for field, ref in _secret_refs(cfg):
        if secrets is None or secrets(field):
            read_secret(ref, field, path, environ)  # refuse at start, not at the first ticket
    return cfg


def _check_api(cfg: ServiceConfig, path: Path) -> None:
    api = cfg.api
    if api.tls is None and not api.allow_plain_http and not _loopback(api.host):
        raise ConfigError(
            str(path),
            f"serves plain HTTP on {api.host}: give api.tls (cert, key) or set api.allow_plain_http: true",
            field="api.host",
        )
    if api.tls is None:
        return
    for name in ("cert", "key", "client_ca"):
        file = getattr(api.tls, name)
        if file is not None and not file.is_file():
            raise ConfigError(str(path), f"{file}: no such file", field=f"api.tls.{name}")
    if api.tls.key.stat().st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise ConfigError(str(path), f"{api.tls.key} is readable by others; chmod 600 it", field="api.tls.key")


def _apply_env(data: dict[str, Any], environ: Any, path: Path) -> dict[str, str]:
    """Apply FABRICD_* overrides to `data`; returns {dotted field: variable} of what was overridden."""
    overrides: dict[str, str] = {}
    for key, value in environ.items():
        if not key.startswith(ENV_PREFIX):
            continue
        parts = key[len(ENV_PREFIX) :].lower().split("__")
        if parts[0] not in ServiceConfig.model_fields or parts[0] == "source":
            continue  # other FABRICD_* variables (lab password, cache dir) are not config overrides
        node = data
        for part in parts[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise ConfigError(str(path), f"{key} overrides '{part}', which is not a section")
            node = child
        node[parts[-1]] = _env_value(value, parts)
        overrides[".".join(parts)] = key
    return overrides


def _env_value(text: str, parts: list[str]) -> Any:
    """A list field as comma-separated text (one item without a comma); everything else as text that pydantic
    converts (a comma in a string, such as a drain hook's reason, stays in the string)."""
    return [t.strip() for t in text.split(",")] if _is_list_field(parts) else text


def _is_list_field(parts: list[str]) -> bool:
    model: type[BaseModel] | None = ServiceConfig
    for i, part in enumerate(parts):
        field = model.model_fields.get(part) if model is not None else None
        if field is None:
            return False
        if i == len(parts) - 1:
            return typing.get_origin(field.annotation) is list
        # descend into the section's model (`WebhookSettings | None` is a section too)
        types = (field.annotation, *typing.get_args(field.annotation))
        model = next((t for t in types if isinstance(t, type) and issubclass(t, BaseModel)), None)
    return False


def _override_of(field: str | None, overrides: dict[str, str]) -> str | None:
    """The FABRICD_* variable that set `field` (or the list or section it is in), if one did."""
    if not field:
        return None
    for dotted, var in overrides.items():
        if field == dotted or field.startswith((dotted + ".", dotted + "[")):
            return var
    return None


def _secret_refs(cfg: ServiceConfig) -> list[tuple[str, SecretRef]]:
    refs: list[tuple[str, SecretRef]] = []
    if cfg.api.token is not None:
        refs.append(("api.token", cfg.api.token))
    if cfg.tickets.backend == "webhook":
        if cfg.tickets.webhook is None:
            raise ConfigError(str(cfg.source), "tickets.backend is webhook but tickets.webhook is missing; add url:")
        if cfg.tickets.webhook.token is not None:
            refs.append(("tickets.webhook.token", cfg.tickets.webhook.token))
    if cfg.tickets.backend == "jira":
        if cfg.tickets.jira is None:
            raise ConfigError(str(cfg.source), "tickets.backend is jira but tickets.jira is missing; add url, project")
        refs.append(("tickets.jira.token", cfg.tickets.jira.token))
    if cfg.jobs.slurmrestd is not None:
        refs.append(("jobs.slurmrestd.token", cfg.jobs.slurmrestd.token))
    if cfg.state.password is not None:
        refs.append(("state.password", cfg.state.password))
    if cfg.ha.enabled or cfg.telemetry.source == "bus":
        for name in ("password", "token"):
            ref = getattr(cfg.bus, name)
            if ref is not None:
                refs.append((f"bus.{name}", ref))
    return refs


def read_secret(ref: SecretRef, field: str, source: Path | None, environ: dict[str, str] | None = None) -> SecretStr:
    """The secret `ref` points to; the error names the field, never the value."""
    where = str(source or "fabricd.yaml")
    env = os.environ if environ is None else environ
    if ref.env:
        value = env.get(ref.env)
        if not value:
            raise ConfigError(where, f"environment variable {ref.env} is not set", field=field)
        return SecretStr(value)
    if ref.file is not None:
        path = ref.file if ref.file.is_absolute() or source is None else source.parent / ref.file
        try:
            mode = path.stat().st_mode
        except OSError as e:
            raise ConfigError(where, f"{path}: {e.strerror}", field=field) from None
        if mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise ConfigError(where, f"{path} is readable by others; chmod 600 it", field=field)
        try:
            value = path.read_text().strip()
        except (OSError, UnicodeDecodeError) as e:
            raise ConfigError(where, f"{path}: cannot read it ({type(e).__name__})", field=field) from None
        if not value:  # an empty token would let an empty bearer header through
            raise ConfigError(where, f"{path} is empty; write the secret into it", field=field)
        return SecretStr(value)
    raise ConfigError(where, "give env: VAR or file: PATH (never the secret itself)", field=field)
