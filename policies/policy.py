"""The policy file (YAML): tuning defaults for RoCE AI fabrics, per-platform capabilities and overrides.

Every default cites where its number comes from (shared/reference/domain.md and platforms.md).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, PrivateAttr, model_validator

from topology.errors import InputError
from topology.sourcefile import load_document, load_model


class PolicyError(InputError):
    """The policy file is invalid."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)  # NaN passes every bound check


class PfcPolicy(_Strict):
    enabled: bool = True
    mtu_bytes: int = Field(9216, ge=1500, le=16384)
    # SONiC (Mellanox) headroom: peer response = pause quanta x 64 B; 905 quanta at 400G/800G, 394 at 100G
    # (domain.md, "PFC headroom").
    peer_response_quanta_high_speed: int = Field(905, ge=0)
    peer_response_quanta_low_speed: int = Field(394, ge=0)
    gearbox_delay_bytes: int = Field(0, ge=0)
    mac_phy_delay_bytes: int = Field(0, ge=0)
    cell_occupancy: float = Field(1.0, ge=1.0, le=4.0)


class EcnPolicy(_Strict):
    enabled: bool = True
    # Thresholds as time at line rate, converted per port speed (bytes = s x speed / 8). 12-120 us is
    # NVIDIA's RoCE TC3 default of 150 KB-1.5 MB at 100G (domain.md, "ECN / DCQCN").
    min_us: float = Field(12.0, gt=0)
    max_us: float = Field(120.0, gt=0)
    # SONiC AZURE_LOSSLESS marks with probability 5% at the max threshold (platforms.md, "SONiC config_db").
    max_probability: int = Field(5, ge=1, le=100)
    # Long haul: thresholds follow the bandwidth-delay product (draft-tian-ccwg-long-haul-cnp, domain.md).
    dci_min_bdp_fraction: float = Field(0.2, gt=0, le=4)
    dci_max_bdp_fraction: float = Field(1.0, gt=0, le=4)

    @model_validator(mode="after")
    def _ordered(self) -> EcnPolicy:
        if self.min_us >= self.max_us:
            raise ValueError("min_us must be below max_us")
        if self.dci_min_bdp_fraction >= self.dci_max_bdp_fraction:
            raise ValueError("dci_min_bdp_fraction must be below dci_max_bdp_fraction")
        return self


class WatchdogPolicy(_Strict):
    enabled: bool = True
    action: Literal["drop", "no-drop", "notify-only"] = "drop"
    # SONiC PFC_WD defaults: detection 200 ms, restoration 200 ms, poll 200 ms, action drop (platforms.md).
    timeout_ms: int = Field(200, ge=10, le=5000)
    polling_ms: int = Field(200, ge=10, le=1000)
    recovery_ms: int = Field(200, ge=10, le=60000)


class DlbPolicy(_Strict):
    mode: Literal["off", "flowlet", "per-packet"] = "flowlet"
    # Juniper's default flowlet inactivity interval (domain.md, "Load balancing").
    inactivity_us: int = Field(256, ge=1, le=100000)
    # Added to twice the largest one-way path-delay difference, so a flowlet gap always covers it.
    margin_us: int = Field(16, ge=0)


class PlatformCaps(_Strict):
    buffer_mb: float = Field(64.0, gt=0, description="packet buffer of a switch of this platform")
    headroom_share: float = Field(0.5, gt=0, le=1, description="share of the buffer PFC headroom may take")
    dr_generated_cnp: bool = Field(True, description="can a DR of this platform generate CNP itself")


class Settings(_Strict):
    """The per-port sections an override may change."""

    pfc: PfcPolicy = PfcPolicy()
    ecn: EcnPolicy = EcnPolicy()
    watchdog: WatchdogPolicy = WatchdogPolicy()
    dlb: DlbPolicy = DlbPolicy()


def _low_high(r: tuple[float, float]) -> tuple[float, float]:
    if r[0] <= 0 or r[0] > r[1]:
        raise ValueError(f"[{r[0]:g}, {r[1]:g}] is not a range: give [low, high] with 0 < low <= high")
    return r


Span = Annotated[tuple[float, float], AfterValidator(_low_high)]
# SONiC ARS_NEXTHOP_GROUP flowlet_idle_time accepts 2..2047 us (congestion-tuning.md §4 [sonic-ars]).
FLOWLET_PLATFORM_US = (2, 2047)


class TuningClass(_Strict):
    """What closed-loop tuning (fabricd/tuning) may set on one port class: each a [low, high] range. Thresholds are
    time at line rate (bytes = us x speed / 8), like `settings.ecn`; physics bounds (fabricd/tuning/bounds.py) may
    narrow them further, never widen them."""

    kmin_us: Span
    kmax_us: Span
    pmax_percent: Span = (1, 100)  # DCQCN paper Pmax 1 %; an Arista AI customer marks at 100 % (domain.md)
    flowlet_us: Span = (64, 1024)  # a quarter to 4x Juniper's 256 us default; Meta ran 256-512 us (§4 [meta24])
    # The queue depths between which a DR generates CNPs itself (long-haul ports only; draft-tian-ccwg-long-haul-cnp,
    # domain.md); the dci class sets its own range.
    dr_cnp_us: Span = (1, 480)

    @model_validator(mode="after")
    def _platform(self) -> TuningClass:
        lo, hi = FLOWLET_PLATFORM_US
        if not lo <= self.flowlet_us[0] <= self.flowlet_us[1] <= hi:
            raise ValueError(f"flowlet_us must lie within {lo}..{hi} us (SONiC flowlet_idle_time)")
        if self.pmax_percent[1] > 100:
            raise ValueError("pmax_percent is a percentage: at most 100")
        return self


# Campus ports: Kmin from the DCQCN paper's 5 KB at 40G (1 us) to NVIDIA's TC3 150 KB-1.5 MB at 100G (12-120 us);
# Kmax up to the 480 us of queue an Arista AI customer runs (domain.md "ECN / DCQCN").
_CAMPUS = {"kmin_us": (1, 120), "kmax_us": (10, 480)}
# Long haul with end-to-end CNP: HPE's Kmin 0.75 x RTT and Kmax 1.5 x RTT up to 500 km (RTT 5.2 ms) ->
# 3.9 ms and 7.8 ms (congestion-tuning.md §1.4 [hpe]); with DR-generated CNP the campus lows apply.
# A DR's own CNP thresholds start where the intent puts them: the ECN thresholds from the BDP
# (`settings.ecn.dci_*_bdp_fraction`, draft-tian-ccwg-long-haul-cnp), up to 1 x BDP at 500 km; its senders are a campus
# loop away, so tuning may take them as low as campus thresholds.
_DCI = {"kmin_us": (1, 4000), "kmax_us": (10, 8000), "flowlet_us": (64, 2047), "dr_cnp_us": (1, 8000)}


class TuningClasses(_Strict):
    server: TuningClass = TuningClass.model_validate(_CAMPUS)
    leaf_spine: TuningClass = TuningClass.model_validate(_CAMPUS)
    spine_superspine: TuningClass = TuningClass.model_validate(_CAMPUS)
    dci: TuningClass = TuningClass.model_validate(_DCI)

    @model_validator(mode="before")
    @classmethod
    def _over_defaults(cls, data: Any) -> Any:
        """A class given in part keeps its own defaults for the rest (dci's are not the campus ones)."""
        if not isinstance(data, dict):
            return data
        out = dict(data)
        for name, given in data.items():
            field = cls.model_fields.get(name)
            if field is not None and isinstance(given, dict) and isinstance(field.default, TuningClass):
                out[name] = {**field.default.model_dump(), **given}
        return out


class TuningPolicy(_Strict):
    """Closed-loop tuning (fabricd/tuning, docs/tuning.md): bounds per port class, step, verify margin, budget."""

    classes: TuningClasses = TuningClasses()
    # The feedback delay of a campus loop (mark -> receiver -> CNP -> sender): the DCQCN fluid model's tau* = 85 us
    # (congestion-tuning.md §1.3 [fluid-py]); long-haul ports add their RTT when CNPs come from the far end.
    campus_feedback_us: float = Field(85.0, gt=0, le=10000)
    # At most this factor per round on a threshold, Pmax or the flowlet gap (fabricd's choice, docs/tuning.md).
    max_step: float = Field(2.0, ge=1.1, le=10)
    # A change is kept only if its target KPI improved by this fraction (fabricd's choice, docs/tuning.md)...
    verify_margin: float = Field(0.10, gt=0, lt=1)
    # ...and no guard KPI got worse by more than this (issue 51: never worse by more than 2 % on any KPI).
    guard_tolerance: float = Field(0.02, ge=0, lt=1)
    changes_per_hour: int = Field(12, ge=0, le=3600)
    changes_per_hour_per_class: int = Field(6, ge=0, le=3600)
    holdoff_minutes: float = Field(60.0, ge=0, le=10080)


class OverrideMatch(_Strict):
    role: Literal["leaf", "spine", "superspine", "dr"] | None = None
    device: str | None = None
    link_class: Literal["server", "fabric", "dci"] | None = None


class Override(_Strict):
    match: OverrideMatch
    set: dict[str, dict[str, Any]]

    @model_validator(mode="after")
    def _known_sections(self) -> Override:
        unknown = set(self.set) - set(Settings.model_fields)
        if unknown:
            raise ValueError(f"unknown section(s) {sorted(unknown)}; use {sorted(Settings.model_fields)}")
        Settings.model_validate(self.set)  # fields and values are checked now, not at render time
        return self

    @property
    def specificity(self) -> int:
        m = self.match
        return (m.device is not None) * 4 + (m.link_class is not None) * 2 + (m.role is not None)


class Policy(_Strict):
    lossless_priorities: list[int] = Field(default_factory=lambda: [3])
    cnp_priority: int = Field(6, ge=0, le=7)
    # RoCEv2 data on DSCP 26 -> traffic class 3, CNP on DSCP 48 -> traffic class 6 (the common RoCE mapping).
    dscp_to_tc: dict[int, int] = Field(default_factory=lambda: {26: 3, 48: 6})
    link_debounce_ms: int = Field(0, ge=0, le=30000, description="0: report flaps as they happen")
    settings: Settings = Settings()
    platforms: dict[str, PlatformCaps] = Field(
        default_factory=lambda: {"eos": PlatformCaps(), "sonic": PlatformCaps(dr_generated_cnp=False)}
    )
    overrides: list[Override] = Field(default_factory=list)
    tuning: TuningPolicy = TuningPolicy()
    _source: str = PrivateAttr("the policy")  # the file it came from, for errors found against a fabric

    def check_devices(self, switches: set[str]) -> None:
        """An override naming a device the fabric does not have is a typo that would silently change nothing."""
        for i, o in enumerate(self.overrides):
            if o.match.device is not None and o.match.device not in switches:
                raise PolicyError(
                    self._source,
                    f"{o.match.device!r} is not a switch of this fabric; check the name (`fabricd topology blueprint`"
                    " lists them)",
                    field=f"overrides[{i}].match.device",
                )

    @model_validator(mode="after")
    def _priorities(self) -> Policy:
        for p in self.lossless_priorities:
            if not 0 <= p <= 7:
                raise ValueError(f"lossless priority {p} is not 0-7")
        if self.cnp_priority in self.lossless_priorities:
            raise ValueError("cnp_priority must not be a lossless priority (CNP must never be paused)")
        return self

    def caps(self, platform: str | None) -> PlatformCaps:
        return self.platforms.get(platform or "", PlatformCaps())


def load_policy(path: str | Path | None) -> Policy:
    """The policy file, or the built-in defaults when no path is given."""
    if path is None:
        return Policy()
    p = Path(path)
    data = load_document(p, PolicyError)
    if data is None:  # an empty file: the defaults
        return Policy()
    policy = load_model(p, Policy, PolicyError, "a policy", "settings, platforms, overrides, ...", data)
    policy._source = str(p)
    return policy
