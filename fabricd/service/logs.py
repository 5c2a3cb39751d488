"""Logging for the service: readable text by default, one JSON object per line on request (log shippers)."""

from __future__ import annotations

import json
import logging
import re
import sys
import time
from collections.abc import Iterable


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out)


# C0, DEL, C1 and the Unicode line and paragraph separators: what could end a log line or drive a terminal
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def escaped(text: str) -> str:
    """Every control character written out as Python writes it (`\\n`, `\\x1b`): a person's text in a message
    (a reason, a target) cannot start a line of its own or forge one."""
    return _CONTROL.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


class TextFormatter(logging.Formatter):
    """The readable format: one line per record whatever its message holds (a traceback still follows it)."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        record.message = escaped(record.message)
        return super().formatMessage(record)


class RedactFilter(logging.Filter):
    """Last line of defence: a secret that reaches a log message anyway is replaced by ***."""

    def __init__(self, secrets: Iterable[str]) -> None:
        super().__init__()
        self.secrets = [s for s in secrets if s]

    def filter(self, record: logging.LogRecord) -> bool:
        if self.secrets:
            msg = record.getMessage()
            if any(s in msg for s in self.secrets):
                for s in self.secrets:
                    msg = msg.replace(s, "***")
                record.msg, record.args = msg, None
        return True


def setup_logging(fmt: str, level: str, secrets: Iterable[str] = ()) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        JsonFormatter() if fmt == "json" else TextFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    )
    handler.addFilter(RedactFilter(secrets))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for noisy in ("apscheduler", "uvicorn.access", "httpx", "asyncssh", "pyeapi", "netmiko", "paramiko"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))
