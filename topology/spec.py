"""The fabric spec (docs/formats.md contract): what the fabric should be."""

from __future__ import annotations

from pathlib import Path
from typing import Literal, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from topology.errors import SpecError
from topology.sourcefile import load_model

PlatformName = Literal["eos", "sonic"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)  # NaN passes every bound check


class CableLengths(_Strict):
    """Cable length in metres per tier (decides PFC headroom)."""

    server: float = Field(3, gt=0)
    leaf_spine: float = Field(30, gt=0)
    spine_superspine: float = Field(150, gt=0)
    dr: float = Field(150, gt=0, description="DR to spine/superspine, inside the campus")


class Platforms(_Strict):
    leaf: PlatformName = "eos"
    spine: PlatformName = "eos"
    superspine: PlatformName = "eos"
    dr: PlatformName = "eos"


class DciSpec(_Strict):
    """A long-haul link bundle to another campus, terminated on deep-buffer DR switches."""

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$", max_length=40)
    distance_km: float = Field(gt=0, le=10000)
    dr_switches: int = Field(2, ge=1, le=64)
    links_per_dr: int = Field(4, ge=1, le=512)
    link_gbps: int = Field(400, gt=0)
    dr_buffer_mb: float = Field(8192, gt=0)


class FabricSpec(_Strict):
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$", max_length=63)
    rails: int = Field(ge=1, le=64)
    aggregation_groups: int = Field(ge=1, le=4096)
    servers_per_group: int = Field(ge=1, le=1024)
    spines_per_rail: int = Field(ge=1, le=512)
    superspines: int = Field(0, ge=0, le=1024)
    server_link_gbps: int = Field(400, gt=0)
    fabric_link_gbps: int = Field(400, gt=0)
    oversubscription: float = Field(1.0, ge=1.0, le=64.0)
    cable_m: CableLengths = CableLengths()
    platforms: Platforms = Platforms()
    dci: list[DciSpec] = Field(default_factory=list)

    @model_validator(mode="after")
    def _unique_dci(self) -> Self:
        names = [d.name for d in self.dci]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"dci names must be unique, repeated: {', '.join(dupes)}")
        return self

    @property
    def servers(self) -> int:
        return self.aggregation_groups * self.servers_per_group

    @property
    def gpus(self) -> int:
        return self.servers * self.rails

    @property
    def leaves(self) -> int:
        return self.aggregation_groups * self.rails

    @property
    def spines(self) -> int:
        return self.rails * self.spines_per_rail


def load_spec(path: str | Path) -> FabricSpec:
    """Read and validate a fabric spec; errors name the file, the line and the field."""
    return load_model(Path(path), FabricSpec, SpecError, "a fabric spec", "name, rails, aggregation_groups, ...")
