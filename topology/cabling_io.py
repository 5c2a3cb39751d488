"""Cabling files (docs/formats.md schema, YAML or JSON by extension): load, check references, write."""

from __future__ import annotations

import json
import re
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from topology.errors import CablingError
from topology.model import Cabling, Device, Endpoint, Link, Role
from topology.sourcefile import load_document, raise_validation_error, write_atomic, yaml_line


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class DeviceEntry(_Strict):
    name: str = Field(min_length=1)
    role: Role
    rail: int | None = Field(None, ge=0)
    group: int | None = Field(None, ge=0)
    platform: str | None = None
    site: str | None = None


class EndpointEntry(_Strict):
    device: str = Field(min_length=1)
    port: str = Field(min_length=1)


class LinkEntry(_Strict):
    a: EndpointEntry
    b: EndpointEntry
    speed_gbps: int | None = Field(None, gt=0)
    length_m: float | None = Field(None, gt=0)


class CablingFile(_Strict):
    devices: list[DeviceEntry]
    links: list[LinkEntry]
    # What `fabricd topology export --format json` adds around the cabling; read and ignored.
    name: str | None = None
    summary: dict[str, object] | None = None


def cabling_from_data(data: object, source: str, path: Path | None = None) -> Cabling:
    """Validate parsed cabling data and turn it into a Cabling; every reference must resolve."""
    if not isinstance(data, dict):
        raise CablingError(source, "a cabling file must be a mapping with 'devices' and 'links'")
    try:
        doc = CablingFile.model_validate(data)
    except ValidationError as exc:
        if path is not None:
            raise_validation_error(path, exc, CablingError)
        raise CablingError(source, str(exc.errors()[0]["msg"])) from None

    def where(loc: list[int | str]) -> int | None:
        return yaml_line(path, loc) if path is not None else None

    devices: list[Device] = []
    names: set[str] = set()
    for i, d in enumerate(doc.devices):
        if d.name in names:
            raise CablingError(
                source,
                f"device '{d.name}' is listed twice; keep one entry",
                line=where(["devices", i]),
                field=f"devices[{i}].name",
            )
        names.add(d.name)
        devices.append(Device(d.name, d.role, d.rail, d.group, d.platform, d.site))
    links: list[Link] = []
    for i, ln in enumerate(doc.links):
        for side, ep in (("a", ln.a), ("b", ln.b)):
            if ep.device not in names:
                raise CablingError(
                    source,
                    f"link refers to device '{ep.device}', which is not in 'devices'; add it there or fix the name",
                    line=where(["links", i, side, "device"]),
                    field=f"links[{i}].{side}.device",
                )
        if ln.a.device == ln.b.device and ln.a.port == ln.b.port:
            raise CablingError(source, "link connects a port to itself", line=where(["links", i]), field=f"links[{i}]")
        links.append(
            Link(Endpoint(ln.a.device, ln.a.port), Endpoint(ln.b.device, ln.b.port), ln.speed_gbps, ln.length_m)
        )
    return Cabling(devices=devices, links=links, source=source)


def load_cabling_file(path: str | Path) -> Cabling:
    p = Path(path)
    return cabling_from_data(load_document(p, CablingError), str(p), p)


def dump_cabling(cabling: Cabling, path: str | Path) -> None:
    """Write a cabling as JSON or YAML (by extension), atomically: a failed write leaves nothing half-written."""
    p = Path(path)
    data = cabling.to_dict()
    if p.suffix.lower() == ".json":
        text = json.dumps(data, indent=1)
    elif p.suffix.lower() in (".yaml", ".yml"):
        text = _yaml_one_line_per_item(data)
    else:
        raise CablingError(str(p), "unknown output format; name the file .json, .yaml or .yml")
    write_atomic(p, text)


_PLAIN = re.compile(r"^[A-Za-z_][A-Za-z0-9_./-]*$")
_YAML_WORDS = {"true", "false", "yes", "no", "on", "off", "null", "y", "n", "~"}


def _scalar(value: object) -> str:
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, int | float):
        return repr(value)
    text = str(value)
    if _PLAIN.match(text) and text.lower() not in _YAML_WORDS:
        return text
    return json.dumps(text)  # a JSON string is a valid double-quoted YAML scalar


def _flow(value: object) -> str:
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_flow(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_flow(v) for v in value) + "]"
    return _scalar(value)


def _yaml_one_line_per_item(data: dict[str, object]) -> str:
    """YAML with one device or link per line, as in docs/formats.md (and much faster than yaml.dump)."""
    lines = []
    for key, items in data.items():
        lines.append(f"{key}:")
        assert isinstance(items, list)
        lines.extend(f"  - {_flow(item)}" for item in items)
    return "\n".join(lines) + "\n"
