"""The whole of fabricd.yaml: every section, and the rules between them."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal, Self

from pydantic import Field, model_validator

from .api import ApiSettings
from .base import _Strict
from .ha import BusSettings, HaSettings, StateSettings
from .jobs import JobSettings
from .remediation import RemediationSettings, SafetyLimits
from .telemetry import DetectorSettings, TelemetrySettings
from .tickets import TicketSettings
from .tuning import TuningSettings


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
    tuning: TuningSettings = Field(default_factory=TuningSettings)
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
