"""The fabric page at scale: how long the service takes to render what the browser fetches every second
(/ui/live: grid, approvals, findings, actions, tickets, audit) and the page itself, for examples/pod-16k.yaml
(512 leaves in 64 groups x 8 rails) and the same 16k GPUs in 128 groups of 16 servers (1,024 leaves), against the
same for examples/small-pod.yaml measured in the same run. `--screenshot F.png` also shows the 128-group page in
Chromium at 1280x800 (Playwright, Debian's chromium), served through the same in-process client.

A service is built in process on each fabric (telemetry is not started: the page reads the state and an empty
store), 50 active findings spread over the leaves, and the endpoints are called through FastAPI's test client.

Run: .venv/bin/python bench/bench_page.py [--rounds 10]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fastapi.testclient import TestClient

from fabricd.detectors.finding import Finding
from fabricd.service.config import load_config
from fabricd.service.daemon import Service
from fabricd.service.surface.api import create_app

REPO = Path(__file__).resolve().parent.parent
TOKEN = "bench-service-token-0001"


def spec_128(tmp: Path) -> Path:
    """16,384 GPUs as 128 aggregation groups of 16 servers: the widest grid a 16k fabric gets."""
    text = (REPO / "examples" / "pod-16k.yaml").read_text()
    text = text.replace("aggregation_groups: 64", "aggregation_groups: 128").replace(
        "servers_per_group: 32", "servers_per_group: 16"
    )
    text = text.replace("spines_per_rail: 32", "spines_per_rail: 16").replace("name: pod-16k", "name: pod-16k-128")
    path = tmp / "pod-16k-128.yaml"
    path.write_text(text)
    return path


def service(spec: str | Path, tmp: Path) -> Service:
    (tmp / "inventory.yaml").write_text(
        "fabric: bench\ndefaults: {username: admin, password_env: BENCH_PW, gnmi: {tls: false}}\n"
        "devices:\n  leaf-g0-r0: {host: 127.0.0.1}\n"
    )
    secret = tmp / "api.token"
    secret.write_text(TOKEN)
    secret.chmod(0o600)
    (tmp / "fabricd.yaml").write_text(
        f"spec: {REPO / 'examples' / spec if isinstance(spec, str) else spec}\n"
        "inventory: inventory.yaml\nstate: state.db\n"
        "api: {token: {file: api.token}}\n"
    )
    return Service(load_config(tmp / "fabricd.yaml", {}))


def measure(spec: str | None, rounds: int, screenshot: Path | None = None) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as d:
        t0 = time.perf_counter()
        svc = service(spec if spec is not None else spec_128(Path(d)), Path(d))
        build_s = time.perf_counter() - t0
        leaves = [x.name for x in svc.fabric.switches() if x.role.value == "leaf"]
        for i, leaf in enumerate(leaves[:: max(1, len(leaves) // 50)][:50]):
            where = (f"{leaf}:Ethernet1/1",)
            f = Finding(kind="link_flap", device=leaf, port="Ethernet1/1", devices=(leaf,), ports=where, start_ts=i,
                        detected_ts=i, severity="warning", confidence=1.0, summary=f"flap on {leaf}")  # fmt: skip
            svc.state.findings.record(f, f"bench:{leaf}", i)
        c = TestClient(create_app(svc))
        c.post("/login", data={"token": TOKEN})
        out: dict[str, float] = {"switches": float(len(svc.fabric.switches())), "service_build_s": build_s}
        for name, path in (("live", "/ui/live"), ("page", "/")):
            times, size = [], 0
            for _ in range(rounds):
                t = time.perf_counter()
                r = c.get(path)
                times.append(time.perf_counter() - t)
                size = len(r.content)
                assert r.status_code == 200
            out[f"{name}_ms"] = statistics.median(times) * 1000
            out[f"{name}_kb"] = size / 1024
        if screenshot is not None:
            shoot(c, screenshot)
        svc.state.close()
        return out


def shoot(c: TestClient, path: Path) -> None:
    from playwright.sync_api import Route, sync_playwright

    def serve(route: Route) -> None:
        r = c.get(route.request.url.removeprefix("http://fabricd.test"))
        route.fulfill(status=r.status_code, body=r.content, headers={"content-type": r.headers["content-type"]})

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/lib/chromium/chromium", args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        page.route("http://fabricd.test/**", serve)
        page.goto("http://fabricd.test/")
        page.screenshot(path=str(path))
        browser.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n", 1)[0])
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--screenshot", type=Path, help="the 128-group page in Chromium at 1280x800 (PNG)")
    ap.add_argument(
        "--smoke", action="store_true", help="seconds on a tiny fabric: proves the bench still runs (a test runs it)"
    )
    args = ap.parse_args(argv)
    os.environ.setdefault("BENCH_PW", "x")
    if args.smoke:  # the small pod against itself: every step of the measurement, none of the size
        small = big = wide = measure("small-pod.yaml", 1)
    else:
        small, big = measure("small-pod.yaml", args.rounds), measure("pod-16k.yaml", args.rounds)
        wide = measure(None, args.rounds, args.screenshot)
    print("| fabric | switches | /ui/live (median) | its size | page (median) | its size |")
    print("|---|---|---|---|---|---|")
    for name, m in (("small-pod", small), ("pod-16k (64 groups)", big), ("16k GPUs in 128 groups", wide)):
        print(f"| {name} | {m['switches']:.0f} | {m['live_ms']:.1f} ms | {m['live_kb']:.0f} KiB | "
              f"{m['page_ms']:.1f} ms | {m['page_kb']:.0f} KiB |")  # fmt: skip
    for name, m in (("pod-16k", big), ("128 groups", wide)):
        print(f"{name} / small-pod: /ui/live {m['live_ms'] / small['live_ms']:.1f}x the time for "
              f"{m['switches'] / small['switches']:.0f}x the switches; refresh period 1000 ms")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
