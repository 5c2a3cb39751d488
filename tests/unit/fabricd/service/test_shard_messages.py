"""What a detector shard publishes and the service reads back: findings survive the trip whole; anything else is
refused with ValueError (the service logs and drops it)."""

from __future__ import annotations

import json

import pytest

from fabricd.detectors.finding import Finding, JobRef
from fabricd.service.shard import findings_message, read_findings_message

STORM = Finding(
    kind="pfc_storm", device="leaf-g1-r1", port="Ethernet1/1", devices=("leaf-g1-r1", "spine-r1-0"),
    ports=("leaf-g1-r1:Ethernet1/1", "spine-r1-0:Ethernet2/1"), start_ts=10, detected_ts=20, severity="critical",
    confidence=0.9, summary="PFC storm", priority=3, evidence={"peer": "gpu-g1-000:nic1", "queues": {"a": {"n": 1}}},
    jobs=(JobRef("job-7", "llama", "high", 512),),
)  # fmt: skip


def test_findings_make_the_round_trip() -> None:
    shard, ts, findings = read_findings_message(findings_message(1, 123, [STORM]))
    assert (shard, ts, findings) == (1, 123, [STORM])
    assert read_findings_message(findings_message(0, 5, [])) == (0, 5, [])


@pytest.mark.parametrize(
    "data",
    [b"not json", b"[]", json.dumps({"shard": 0, "ts": 1}).encode(),
     json.dumps({"shard": 0, "ts": 1, "findings": [{"kind": "x"}]}).encode()],
)  # fmt: skip
def test_other_messages_are_refused(data: bytes) -> None:
    with pytest.raises((ValueError, KeyError, TypeError)):
        read_findings_message(data)
