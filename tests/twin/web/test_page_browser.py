"""The fabric page in a real browser: Playwright driving Debian's Chromium against the service on the twin. Log in
with the keyboard, see a flap turn its switch's cell and its finding appear within 2 s, approve the action as an
operator and see the port go down; as a viewer, see no approve button and be refused when forging the form.
Screenshots land in the test's folder (and in docs/img when FABRICD_DOC_SCREENSHOTS=1)."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from lab.control_client import inject
from tests.conftest import EXAMPLES, REPO
from tests.twin.fabricd.service.service_thread import TOKEN, ServiceThread, wait_for, write_config
from tests.twin.lab.twin_thread import TwinThread
from topology.spec import load_spec

# Debian's chromium package: the real binary behind its /usr/bin/chromium launcher script
_CANDIDATES = ("/usr/lib/chromium/chromium", shutil.which("chromium") or "")
CHROMIUM = next((p for p in _CANDIDATES if p and Path(p).exists()), None)
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        CHROMIUM is None and not os.environ.get("FABRICD_REQUIRE_BROWSER"),
        reason="no chromium (apt-get install chromium); .ci/run installs it",
    ),
]
FLAP_PORT = "leaf-g0-r0:Ethernet1/1"


@pytest.fixture(scope="module")
def twin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TwinThread]:
    t = TwinThread(load_spec(EXAMPLES / "small-pod.yaml"), tmp_path_factory.mktemp("twin")).start()
    yield t
    t.stop()


def token(svc: ServiceThread, user: str, role: str) -> str:
    r = httpx.post(svc.url + "/api/v1/tokens", json={"user": user, "role": role},
                   headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10)  # fmt: skip
    assert r.status_code == 201, r.text
    value: str = r.json()["token"]
    return value


def shot(page: object, tmp_path: Path, name: str) -> None:
    from playwright.sync_api import Page

    assert isinstance(page, Page)
    page.screenshot(path=str(tmp_path / name), full_page=False)
    if os.environ.get("FABRICD_DOC_SCREENSHOTS"):
        (REPO / "docs" / "img").mkdir(exist_ok=True)
        shutil.copy(tmp_path / name, REPO / "docs" / "img" / name)


def test_flap_in_the_browser_approve_as_operator_refused_as_viewer(twin: TwinThread, tmp_path: Path) -> None:
    from playwright.sync_api import expect, sync_playwright

    assert CHROMIUM is not None, "FABRICD_REQUIRE_BROWSER is set but chromium is not installed"
    svc = ServiceThread(write_config(tmp_path, twin.inventory, remediation={"mode": "approve"})).start()
    try:
        operator, viewer = token(svc, "olga", "operator"), token(svc, "vic", "viewer")
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
            ctx = browser.new_context(viewport={"width": 1280, "height": 800}, color_scheme="light")
            page = ctx.new_page()
            page.goto(svc.url + "/")
            # the keyboard alone: the token field has the focus, Enter submits (typing before autofocus has
            # taken effect would lose keys on a loaded machine)
            expect(page.locator("#token")).to_be_focused()
            page.keyboard.type(operator)
            page.keyboard.press("Enter")
            cell = page.locator('#grid a[data-device="leaf-g0-r0"]')
            expect(cell).to_have_attribute("data-health", "ok")
            expect(page.locator("header .who")).to_have_text("user:olga (operator)")
            shot(page, tmp_path, "page-healthy.png")

            inject(twin.state_dir, "link_flap", {"port": FLAP_PORT, "count": 8, "period_s": 0.3})
            (found,) = wait_for(lambda: svc.get("/api/v1/findings")["findings"], 15, 0.05)
            expect(cell).to_have_attribute("data-health", "warning", timeout=5000)
            seen = time.time()
            latency = seen - found["detected_ts"] / 1e9
            assert latency < 2.0, f"the cell turned {latency:.2f} s after the finding"
            expect(page.locator("#findings")).to_contain_text("link_flap")
            expect(page.locator("#findings")).to_contain_text("leaf-g0-r0")

            (action,) = wait_for(lambda: svc.get("/api/v1/actions", status="awaiting_approval")["actions"], 10)
            approval = page.locator(f"#action-{action['id']}")
            expect(approval).to_contain_text("shutdown")  # the side-by-side diff of the change
            shot(page, tmp_path, "page-approval.png")
            approval.get_by_role("button", name=f"approve {action['id']}").click()
            expect(page.locator(".flash")).to_contain_text(f"action {action['id']}: running")
            disabled = wait_for(lambda: svc.get("/api/v1/ports/disabled")["ports"], 15)
            assert [(d["device"], d["port"]) for d in disabled] == [("leaf-g0-r0", "Ethernet1/1")]
            audit = svc.get("/api/v1/audit")["audit"]
            assert any(a["what"] == f"approved action {action['id']}" and a["actor"] == "user:olga" for a in audit)

            # a viewer: sees the fabric, no approve button, and a forged form post is refused
            vctx = browser.new_context(viewport={"width": 1280, "height": 800}, color_scheme="dark")
            vpage = vctx.new_page()
            vpage.goto(svc.url + "/")
            vpage.fill("#token", viewer)
            vpage.click("button[type=submit]")
            expect(vpage.locator("header .who")).to_have_text("user:vic (viewer)")
            expect(vpage.locator('#grid a[data-device="leaf-g0-r0"]')).to_have_attribute("data-health", "warning")
            assert vpage.get_by_role("button", name="approve").count() == 0
            csrf = vpage.locator('input[name="csrf"]').first.get_attribute("value") or ""
            forged = vpage.request.post(svc.url + f"/ui/actions/{action['id']}/approve", form={"csrf": csrf})
            assert forged.status == 403 and "this needs operator" in forged.text()
            vpage.click('#grid a[data-device="leaf-g0-r0"]')
            expect(vpage.locator("h1")).to_contain_text("leaf-g0-r0")
            expect(vpage.locator("main")).to_contain_text("Ethernet1/1")
            shot(vpage, tmp_path, "page-switch-dark.png")
            browser.close()
    finally:
        svc.stop()
