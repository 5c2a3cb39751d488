"""`fabricd.yaml`: what the service watches, how it may act, where it keeps state and how it is reached.

Every key has a safe default (observe mode, small disable budgets, API on localhost). Environment variables
override the file: `FABRICD_REMEDIATION__MODE=auto` sets `remediation.mode` (`__` separates levels).
Secrets are never values in the file: `*_env` names an environment variable, `*_file` a 0600 file.

One module per concern: base (the error, strict sections, secret references), telemetry (telemetry, detectors),
jobs, remediation (remediation, safety, maintenance), tickets, tuning, api, ha (state, bus, ha), service (the whole
file), secret (reading secrets) and load (the file, overrides, checks). Every name is importable from here.
"""

from __future__ import annotations

from .api import ApiSettings, TlsSettings, TrustedProxySettings
from .base import ConfigError, SecretRef
from .ha import BusSettings, HaSettings, StateSettings
from .jobs import JobSettings, SlurmRestSettings
from .load import ENV_PREFIX, load_config
from .remediation import MaintenanceSettings, RemediationSettings, SafetyLimits
from .secret import read_secret
from .service import ServiceConfig
from .telemetry import DciDetectorSettings, DetectorSettings, OpticsTrendSettings, TelemetrySettings, max_workers
from .tickets import JiraSettings, TicketSettings, WebhookSettings
from .tuning import TuningSettings

__all__ = [
    "ENV_PREFIX", "ApiSettings", "BusSettings", "ConfigError", "DciDetectorSettings", "DetectorSettings", "HaSettings",
    "JiraSettings", "JobSettings", "MaintenanceSettings", "OpticsTrendSettings", "RemediationSettings", "SafetyLimits",
    "SecretRef", "ServiceConfig", "SlurmRestSettings", "StateSettings", "TelemetrySettings", "TicketSettings",
    "TlsSettings", "TrustedProxySettings", "TuningSettings", "WebhookSettings", "load_config", "max_workers",
    "read_secret",
]  # fmt: skip
