"""Platform profiles, subscription narrowing and detector coverage: pure tables, no sockets."""

from __future__ import annotations

import pytest

from fabricd.cli.service_cmd import coverage_lines
from fabricd.detectors.coverage import Degraded, degraded
from fabricd.telemetry.paths import Subscription, eos_profile, leaves_under
from fabricd.telemetry.platforms import (
    EOS,
    Fact,
    Missing,
    Served,
    missing_leaves,
    narrow,
    parse_release,
    plan,
    refuses_encoding,
    served,
)

FEC = "/interfaces/interface[name=*]/ethernet/phys/phy[index=*]/ingress/fec/state"
PFC3 = "/interfaces/interface[name=*]/ethernet/pfc/priorities/priority[index=3]/state"
COUNTERS = "/interfaces/interface[name=*]/state/counters"
OPER = "/interfaces/interface[name=*]/state/oper-status"


@pytest.mark.parametrize(
    ("text", "release"),
    [
        ("4.31.2F", (4, 31, 2)),
        ("4.36.1F-12345.4361F", (4, 36, 1)),
        ("4.35", (4, 35, 0)),
        ("EOS-4.24.0M", (4, 24, 0)),
        ("", None),
        (None, None),
        ("latest", None),
    ],
)
def test_parse_release(text: str | None, release: tuple[int, int, int] | None) -> None:
    assert parse_release(text) == release


@pytest.mark.parametrize(
    ("fact", "release", "want"),
    [
        (Fact((4, 35, 0), None, "x"), (4, 35, 0), Served.YES),
        (Fact((4, 35, 0), None, "x"), (4, 34, 9), Served.NO),  # older than the release that added it
        (Fact((4, 35, 0), None, "x"), None, Served.UNKNOWN),
        (Fact(None, (4, 31, 2), "x"), (4, 31, 2), Served.NO),
        (Fact(None, (4, 31, 2), "x"), (4, 28, 0), Served.NO),
        (Fact(None, (4, 31, 2), "x"), (4, 32, 0), Served.UNKNOWN),  # nobody recorded a later release: not guessed
        (Fact((4, 33, 0), (4, 31, 2), "x"), (4, 32, 1), Served.UNKNOWN),
        (Fact((4, 33, 0), (4, 31, 2), "x"), (4, 33, 0), Served.YES),
    ],
)
def test_fact_served(fact: Fact, release: tuple[int, int, int] | None, want: Served) -> None:
    assert fact.served(release) is want


@pytest.mark.parametrize(
    ("leaf", "version", "want"),
    [
        ("if.in-pkts", (4, 24, 0), Served.YES),  # a base leaf: no fact needed
        ("pfc.in-frames", (4, 23, 0), Served.NO),
        ("pfc.pfc-on-total-rx-time", (4, 36, 1), Served.YES),
        ("fec.pre-fec-ber", (4, 31, 2), Served.NO),
        ("if.in-pkts", None, Served.UNKNOWN),
    ],
)
def test_served_by_eos(leaf: str, version: tuple[int, int, int] | None, want: Served) -> None:
    assert served("eos", leaf, version) is want
    assert served("junos", leaf, version) is Served.UNKNOWN  # no profile: nothing is claimed


def test_every_fact_names_a_known_leaf_and_a_source() -> None:
    known = leaves_under("/interfaces") | leaves_under("/qos") | leaves_under("/components") | leaves_under("/lldp")
    for leaf, fact in EOS.items():
        assert leaf in known, leaf
        assert fact.source and (fact.since or fact.absent_in)


@pytest.mark.parametrize(
    ("path", "leaves"),
    [
        (OPER, {"oper-status"}),
        (FEC, {"fec.corrected-codewords", "fec.uncorrected-codewords", "fec.pre-fec-ber"}),
        ("/components/component[name=*]/state/temperature", {"optics.temperature"}),
        ("/interfaces/interface[name=Ethernet1/1]/state/counters/in-pkts", {"if.in-pkts"}),
        ("/interfaces/interface[name=*]/ethernet/pfc/priorities/priority[index=4]/state/in-frames", {"pfc.in-frames"}),
        ("/system/state/hostname", set()),
        ("not a [path", set()),
    ],
)
def test_leaves_under(path: str, leaves: set[str]) -> None:
    assert leaves_under(path) == leaves


def test_plan_for_4_31_2f_leaves_out_the_fec_subtree_and_names_the_missing_leaves() -> None:
    p = plan("eos", "4.31.2F", eos_profile(10.0))
    assert [path for path, _ in p.skipped] == [FEC]
    assert FEC not in [s.path for s in p.subscriptions] and PFC3 in [s.path for s in p.subscriptions]
    why = {m.leaf: m.reason for m in p.missing}
    assert set(why) == {
        "eth.in-symbol-error",
        *("fec.corrected-codewords", "fec.uncorrected-codewords", "fec.pre-fec-ber"),
        *("pfc.pfc-on-total-rx-time", "pfc.pfc-on-max-rx-time", "pfc.rx-transitions", "pfc.dropped-pkts"),
    }
    assert why["pfc.pfc-on-total-rx-time"] == "not in EOS 4.31.2F (from 4.35.0; reference/platforms.md)"
    assert "issue 15" in why["fec.pre-fec-ber"]
    assert "pfc.in-frames" in p.expected and "pfc.pfc-on-total-rx-time" not in p.expected


@pytest.mark.parametrize("version", ["4.36.1F", None, "not-a-version"])
def test_plan_without_a_known_gap_subscribes_everything(version: str | None) -> None:
    subs = eos_profile(10.0)
    p = plan("eos", version, subs)
    assert p.subscriptions == tuple(subs) and p.skipped == () and p.missing == ()


def test_plan_for_an_unknown_platform_keeps_its_subscriptions() -> None:
    subs = [Subscription(OPER, "on_change")]
    assert plan("sonic", "SONiC.202411", subs).subscriptions == tuple(subs)


A = Subscription(OPER, "on_change")
B = Subscription(COUNTERS, "sample", 10**10)
C = Subscription(FEC, "sample", 10**10)
D = Subscription(PFC3, "sample", 10**10)


@pytest.mark.parametrize(
    ("group", "detail", "instead", "given_up"),
    [
        ((B, C, D), f"path {FEC} is not supported", [(B, D)], [C]),  # named with its keys
        ((B, C, D), "unknown path /interfaces/interface/ethernet/phys/phy/ingress/fec/state", [(B, D)], [C]),
        ((C,), f"path {FEC} is not supported", [], [C]),
        ((B, C, D), "unsupported path", [(B,), (C, D)], []),  # named nothing: split in two
        ((C, D), "unsupported path", [(C,), (D,)], []),
        ((C,), "unsupported path", [], [C]),  # a group of one that is refused is given up
        ((A, B), f"{OPER} and {COUNTERS}", [], [A, B]),
    ],
)
def test_narrow(
    group: tuple[Subscription, ...],
    detail: str,
    instead: list[tuple[Subscription, ...]],
    given_up: list[Subscription],
) -> None:
    assert narrow(group, detail) == (instead, given_up)


def test_missing_leaves_reasons_in_order_of_certainty() -> None:
    got = missing_leaves(
        expected={"if.in-pkts", "pfc.in-frames", "queue.transmit-pkts", "optics.input-power"},
        seen={"if.in-pkts"},
        known={"fec.pre-fec-ber": "not in EOS 4.31.2F", "pfc.rx-transitions": "not in EOS 4.31.2F"},
        rejected={"pfc.in-frames": "NOT_FOUND: path ... is not supported"},
    )
    assert got == [
        Missing("fec.pre-fec-ber", "not in EOS 4.31.2F"),
        Missing("optics.input-power", "not streamed by the switch"),
        Missing("pfc.in-frames", "NOT_FOUND: path ... is not supported"),
        Missing("pfc.rx-transitions", "not in EOS 4.31.2F"),
        Missing("queue.transmit-pkts", "not streamed by the switch"),
    ]
    # a leaf the profile says is absent but the switch streams after all is not missing
    assert missing_leaves(set(), {"fec.pre-fec-ber"}, {"fec.pre-fec-ber": "x"}, {}) == []


FEC_LEAVES = ("fec.corrected-codewords", "fec.uncorrected-codewords", "fec.pre-fec-ber")


@pytest.mark.parametrize(
    ("missing", "want"),
    [
        ((), []),
        (("lldp.system-name",), []),  # no detector reads it
        (
            FEC_LEAVES,
            [
                Degraded("link_corruption", False, ("fec.uncorrected-codewords", "fec.corrected-codewords",
                                                    "fec.pre-fec-ber")),
                Degraded("silent_corruption", False, ("fec.uncorrected-codewords",)),
                Degraded("optics_trend", False, ("fec.pre-fec-ber", "fec.corrected-codewords")),
            ],
        ),
        (
            ("pfc.pfc-on-total-rx-time",),
            [Degraded("pfc_storm", False, ("pfc.pfc-on-total-rx-time",)),
             Degraded("pfc_deadlock", False, ("pfc.pfc-on-total-rx-time",))],
        ),
        (("if.in-fcs-errors",), []),  # in-crc-errors counts the same frames
        (
            ("if.in-fcs-errors", "eth.in-crc-errors", "if.in-errors"),
            [Degraded("link_corruption", True, ("if.in-fcs-errors", "eth.in-crc-errors", "if.in-errors")),
             Degraded("silent_corruption", True, ("if.in-fcs-errors", "eth.in-crc-errors", "if.in-errors"))],
        ),
        (("oper-status",), [Degraded("link_flap", True, ("oper-status",))]),
        (
            ("queue.transmit-pkts",),
            [Degraded("pfc_storm", True, ("queue.transmit-pkts",)),
             Degraded("pfc_deadlock", True, ("queue.transmit-pkts",))],
        ),
    ],
)  # fmt: skip
def test_degraded_detectors(missing: tuple[str, ...], want: list[Degraded]) -> None:
    assert degraded(missing) == want


def test_status_lines_group_switches_that_share_a_gap() -> None:
    why = "not in EOS 4.31.2F (from 4.35.0; reference/platforms.md)"

    def entry(device: str) -> dict[str, object]:
        return {
            "device": device,
            "missing": [{"leaf": "pfc.pfc-on-total-rx-time", "reason": why}],
            "degraded": [{"detector": "pfc_storm", "blind": False, "leaves": ["pfc.pfc-on-total-rx-time"]}],
            "rejected": [],
        }

    refused = entry("leaf-9") | {
        "degraded": [{"detector": "link_flap", "blind": True, "leaves": ["oper-status"]}],
        "missing": [{"leaf": "oper-status", "reason": "NOT_FOUND: no such path"}],
        "rejected": [{"path": "/interfaces/interface[name=*]/state/oper-status", "reason": "NOT_FOUND: no such path"}],
    }
    lines = coverage_lines([*(entry(f"leaf-{k}") for k in range(8)), refused])
    assert lines == [
        "telemetry coverage: 9 switch(es) stream less than their profile",
        "  link_flap blind on leaf-9: no oper-status: NOT_FOUND: no such path",
        "  pfc_storm degraded on leaf-0, leaf-1, leaf-2, leaf-3, leaf-4, leaf-5 and 2 more: "
        f"no pfc.pfc-on-total-rx-time: {why}",
        "  refused on leaf-9: /interfaces/interface[name=*]/state/oper-status (NOT_FOUND: no such path)",
    ]
    assert coverage_lines([]) == []


@pytest.mark.parametrize(
    ("code", "detail", "want"),
    [
        ("UNIMPLEMENTED", "unsupported encoding: PROTO", True),
        ("INVALID_ARGUMENT", "Encoding PROTO not supported", True),
        ("NOT_FOUND", f"path {FEC} is not supported", False),
        ("UNAUTHENTICATED", "encoding proto", False),  # not a refusal of what was asked
    ],
)
def test_refuses_encoding(code: str, detail: str, want: bool) -> None:
    assert refuses_encoding(code, detail) is want
