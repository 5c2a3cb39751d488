"""The telemetry and detectors sections: what is sampled how often, from where, and what the detectors look for."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal, Self

from pydantic import Field, field_validator, model_validator

from fabricd.detectors.runner import PASS_GAP_S
from fabricd.telemetry.paths import SAMPLE_GROUPS

from .base import _Strict


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
