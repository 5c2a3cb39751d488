"""Slurm hostlist expressions: compress names to `gpu-g0-[000-031]` and expand them back.

Expansion follows Slurm's parser (checked against `scontrol show hostnames` of Slurm 22.05.8,
tests/twin/slurm): a range `lo-hi` is zero-padded to the width of `lo` (`[000-031]` gives 000..031,
`[9-10]` gives 9, 10), a bracket may hold a comma list of numbers and ranges, text may sit between
brackets (`x[1-2]y[0-1]`) but not after the last one (Slurm rejects `rack[1-2]-a`), and commas outside
brackets separate names. A space inside a bracket is refused: Slurm counts it into the zero-padding
(`n[ 1-2]` gives n01, n02).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable

from topology.errors import FabricdError

_TRAILING_NUMBER = re.compile(r"^(.*?)(\d+)$")
_MAX_RANGE = 1_000_000


def expand_hostlist(expr: str) -> list[str]:
    """Every name a hostlist expression stands for, in the order written."""
    out: list[str] = []
    for item in _split_top_level(expr):
        out.extend(_expand_item(item, expr))
    return out


def compress_hostlist(names: Iterable[str]) -> str:
    """A hostlist expression for these names (sorted; numeric runs collapsed to ranges)."""
    plain: set[str] = set()
    # (prefix, width) -> numbers; width 0 means "not zero-padded".
    runs: dict[tuple[str, int], set[int]] = defaultdict(set)
    for name in names:
        if not name or any(c in name for c in "[],") or name.strip() != name or " " in name:
            raise FabricdError(f"'{name}' cannot be written in a Slurm hostlist; rename the device")
        m = _TRAILING_NUMBER.match(name)
        if m is None:
            plain.add(name)
            continue
        digits = m.group(2)
        width = len(digits) if digits.startswith("0") and len(digits) > 1 else 0
        runs[(m.group(1), width)].add(int(digits))
    # An unpadded number as wide as a padded run of the same prefix (100 next to 000..099) joins that run.
    for prefix, width in [k for k in runs if k[1] > 0]:
        loose = runs.get((prefix, 0), set())
        fitting = {n for n in loose if len(str(n)) == width}
        if fitting:
            runs[(prefix, width)] |= fitting
            loose -= fitting
            if not loose:
                del runs[(prefix, 0)]
    parts = sorted(plain)
    for (prefix, width), numbers in sorted(runs.items()):
        parts.append(_format_run(prefix, width, sorted(numbers)))
    return ",".join(parts)


def _format_run(prefix: str, width: int, numbers: list[int]) -> str:
    def fmt(n: int) -> str:
        return f"{n:0{width}d}"

    if len(numbers) == 1:
        return prefix + fmt(numbers[0])
    ranges: list[str] = []
    start = prev = numbers[0]
    for n in [*numbers[1:], None]:
        if n is not None and n == prev + 1:
            prev = n
            continue
        ranges.append(fmt(start) if start == prev else f"{fmt(start)}-{fmt(prev)}")
        if n is not None:
            start = prev = n
    return f"{prefix}[{','.join(ranges)}]"


def _split_top_level(expr: str) -> list[str]:
    items: list[str] = []
    depth = 0
    current: list[str] = []
    for c in expr:
        if c == "[":
            depth += 1
        elif c == "]":
            depth -= 1
            if depth < 0:
                raise FabricdError(f"hostlist '{expr}': ']' without '['; fix the brackets")
        if c == "," and depth == 0:
            items.append("".join(current))
            current = []
        else:
            current.append(c)
    if depth != 0:
        raise FabricdError(f"hostlist '{expr}': '[' without ']'; fix the brackets")
    items.append("".join(current))
    return [i.strip() for i in items if i.strip()]


def _expand_item(item: str, expr: str) -> list[str]:
    open_at = item.find("[")
    if open_at < 0:
        return [item]
    close_at = item.index("]", open_at)
    prefix, body, rest = item[:open_at], item[open_at + 1 : close_at], item[close_at + 1 :]
    if rest and "[" not in rest:
        raise FabricdError(f"hostlist '{expr}': '{rest}' after the last ']'; Slurm rejects it, so list those names")
    tails = _expand_item(rest, expr)
    out: list[str] = []
    for part in body.split(","):
        lo, sep, hi = part.partition("-")
        if not lo.isdigit() or (sep and not hi.isdigit()):
            raise FabricdError(f"hostlist '{expr}': '{part}' is not a number or a range lo-hi")
        first, last = int(lo), int(hi) if sep else int(lo)
        if last < first or last - first >= _MAX_RANGE:
            raise FabricdError(f"hostlist '{expr}': range '{part}' is empty or too large")
        out.extend(f"{prefix}{n:0{len(lo)}d}{tail}" for n in range(first, last + 1) for tail in tails)
    return out
