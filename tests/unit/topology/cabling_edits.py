"""Minimal perturbations of a cabling, for rule tests."""

from __future__ import annotations

from dataclasses import replace

from topology.model import Cabling, Device, Endpoint, Link


def ep(text: str) -> Endpoint:
    device, _, port = text.partition(":")
    return Endpoint(device, port)


def find(cabling: Cabling, end: str) -> int:
    e = ep(end)
    for i, link in enumerate(cabling.links):
        if e in (link.a, link.b):
            return i
    raise KeyError(end)


def links_between(cabling: Cabling, a: str, b: str) -> list[int]:
    return [i for i, ln in enumerate(cabling.links) if {ln.a.device, ln.b.device} == {a, b}]


def with_links(cabling: Cabling, links: list[Link]) -> Cabling:
    return Cabling(list(cabling.devices), links, cabling.source)


def drop(cabling: Cabling, index: int) -> Cabling:
    links = list(cabling.links)
    del links[index]
    return with_links(cabling, links)


def add(cabling: Cabling, link: Link, devices: list[Device] | None = None) -> Cabling:
    out = with_links(cabling, [*cabling.links, link])
    if devices:
        out.devices.extend(devices)
    return out


def rewire(cabling: Cabling, fixed_end: str, new_far: str) -> Cabling:
    """Move the far end of the link on `fixed_end` to `new_far`."""
    i = find(cabling, fixed_end)
    link = cabling.links[i]
    fixed = ep(fixed_end)
    new = replace(link, b=ep(new_far)) if link.a == fixed else replace(link, a=ep(new_far))
    links = list(cabling.links)
    links[i] = new
    return with_links(cabling, links)


def swap_far_ends(cabling: Cabling, end1: str, end2: str) -> Cabling:
    """Swap the cables of two server NICs at their far (leaf) ends."""
    i, j = find(cabling, end1), find(cabling, end2)
    li, lj = cabling.links[i], cabling.links[j]
    links = list(cabling.links)
    links[i] = replace(li, b=lj.b)
    links[j] = replace(lj, b=li.b)
    return with_links(cabling, links)
