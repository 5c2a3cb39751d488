"""What the API and the page see of the running service: a narrow interface, so the arrows go one way.

`daemon.Service` builds the app (`api.create_app`) and mounts the page (`web.mount`) with itself as this surface; the
API and the page depend on this Protocol, never on the daemon, so nothing in the service imports in a circle.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from prometheus_client import CollectorRegistry

from fabricd.detectors.dci_ports import DciPortsState
from fabricd.jobs.report import JobReport
from fabricd.telemetry import Ingestor
from fabricd.telemetry.workers import TelemetrySource
from topology.fabric import Fabric

from ..config import ServiceConfig
from ..port_view import TelemetryPortView
from ..remediation.wiring import Remediation
from ..state import StateStore, Ticket
from .access import Principal


class ServiceSurface(Protocol):
    cfg: ServiceConfig
    fabric: Fabric
    state: StateStore
    remediation: Remediation
    ingestor: Ingestor
    telemetry: TelemetrySource
    view: TelemetryPortView
    registry: CollectorRegistry
    dci_state: DciPortsState
    lossless: int  # the priority whose PFC and queue counters the page and /metrics show

    def health(self) -> dict[str, Any]: ...
    def principal(self, token: str) -> Principal | None: ...
    def proxied(self, client: str | None, headers: Mapping[str, str]) -> Principal | None: ...
    def job_reports(self) -> list[JobReport]: ...
    def jobs_through(self, ports: list[str]) -> list[str]: ...
    def topology_summary(self) -> dict[str, Any]: ...
    def tuning_report(self) -> dict[str, Any]: ...
    def tuning_history(self, limit: int = 200, changes_only: bool = False) -> list[dict[str, Any]]: ...
    async def publish(self, ticket: Ticket) -> None: ...
