"""Per-user tokens and roles on every endpoint; the actor comes from the token; bounded lists and bodies; bad
query values are 400 naming the field; TLS and the plain-HTTP rule; `fabricd token` on the state file."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from fabricd.cli import main as cli
from fabricd.detectors.finding import Finding
from fabricd.service.config import ConfigError, load_config
from fabricd.service.daemon import Service
from fabricd.service.surface.access import Role, token_hash
from fabricd.service.surface.api import create_app
from tests.conftest import EXAMPLES
from topology.units import NS

SERVICE_TOKEN = "svc-token-for-tests-7a1f"


def write(tmp: Path, extra: str = "") -> Path:
    (tmp / "inventory.yaml").write_text(
        "fabric: small-pod\ndefaults: {username: admin, password_env: FABRICD_TEST_PW, gnmi: {tls: false}}\n"
        "devices:\n  leaf-g0-r0: {host: 127.0.0.1}\n"
    )
    secret = tmp / "api.token"
    secret.write_text(SERVICE_TOKEN)
    secret.chmod(0o600)
    cfg = tmp / "fabricd.yaml"
    cfg.write_text(
        f"spec: {EXAMPLES / 'small-pod.yaml'}\ninventory: inventory.yaml\nstate: state.db\n"
        f"api:\n  token: {{file: api.token}}\n  max_list: 100\n{extra}"
    )
    return cfg


@pytest.fixture
def client(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[TestClient, Service]]:
    monkeypatch.setenv("FABRICD_TEST_PW", "pw")
    svc = Service(load_config(write(tmp_path), {}))
    try:
        yield TestClient(create_app(svc)), svc
    finally:
        svc.state.close()


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def make(client: TestClient, user: str, role: str) -> str:
    r = client.post("/api/v1/tokens", json={"user": user, "role": role}, headers=bearer(SERVICE_TOKEN))
    assert r.status_code == 201, r.text
    token: str = r.json()["token"]
    assert token.startswith("fabricd_") and r.json()["user"] == user and r.json()["role"] == role
    return token


READS = ["/api/v1/findings", "/api/v1/actions", "/api/v1/tickets", "/api/v1/audit", "/api/v1/ports/disabled",
         "/api/v1/topology/summary", "/api/v1/dci", "/api/v1/jobs", "/api/v1/tuning"]  # fmt: skip


def test_roles_on_every_endpoint(client: tuple[TestClient, Service]) -> None:
    c, _ = client
    tokens = {role: make(c, f"{role}-user", role) for role in ("viewer", "operator", "admin")}
    # no token: reads refused (anonymous_read is off), health and metrics open
    for path in READS:
        r = c.get(path)
        assert r.status_code == 401 and "fabricd token create" in r.json()["error"]
    assert c.get("/api/v1/health").status_code == 200 and c.get("/metrics").status_code == 200
    for role, token in tokens.items():
        for path in READS:
            assert c.get(path, headers=bearer(token)).status_code == 200, (role, path)
    # approve / resolve: viewer refused with its role named; operator gets through to the remediator (404: no id)
    for path in ("/api/v1/actions/99/approve", "/api/v1/tickets/99/resolve"):
        r = c.post(path, headers=bearer(tokens["viewer"]))
        assert r.status_code == 403 and r.json()["error"] == "user:viewer-user is viewer; this call needs operator"
        assert c.post(path, headers=bearer(tokens["operator"])).status_code == 404
    # tokens: admin only
    assert c.get("/api/v1/tokens", headers=bearer(tokens["operator"])).status_code == 403
    listed = c.get("/api/v1/tokens", headers=bearer(tokens["admin"])).json()["tokens"]
    assert [t["user"] for t in listed] == ["viewer-user", "operator-user", "admin-user"]
    assert all("token" not in t and "hash" not in t for t in listed)
    # a wrong token, a malformed header
    assert c.get("/api/v1/findings", headers=bearer("fabricd_nope")).status_code == 401
    assert c.get("/api/v1/findings", headers={"Authorization": "Basic abc"}).status_code == 401


def test_the_actor_is_the_token_never_a_header(client: tuple[TestClient, Service]) -> None:
    c, svc = client
    admin = make(c, "alice@example.com", "admin")
    r = c.post("/api/v1/tokens", json={"user": "bob", "role": "operator"},
               headers={**bearer(admin), "X-Fabricd-Actor": "mallory"})  # fmt: skip
    assert r.status_code == 201 and r.json()["created_by"] == "user:alice@example.com"
    audit = svc.state.audit.entries()
    assert audit[0]["actor"] == "user:alice@example.com" and "mallory" not in json.dumps(audit)
    assert audit[1]["actor"] == "service-token"  # alice's token was made with the service token


def test_revoked_tokens_stop_at_once_and_only_hashes_are_stored(client: tuple[TestClient, Service]) -> None:
    c, svc = client
    token = make(c, "carol", "viewer")
    assert c.get("/api/v1/findings", headers=bearer(token)).status_code == 200
    (row,) = [t for t in svc.state.access.tokens() if t.user == "carol"]
    assert c.delete(f"/api/v1/tokens/{row.id}", headers=bearer(SERVICE_TOKEN)).json() == {"revoked": row.id}
    assert c.get("/api/v1/findings", headers=bearer(token)).status_code == 401
    assert c.delete(f"/api/v1/tokens/{row.id}", headers=bearer(SERVICE_TOKEN)).status_code == 404  # never twice
    assert svc.state.path is not None
    raw = svc.state.path.read_bytes() + Path(str(svc.state.path) + "-wal").read_bytes()
    assert token.encode() not in raw and token_hash(token).encode() in raw


def test_bad_values_are_400_naming_the_field(client: tuple[TestClient, Service]) -> None:
    c, _ = client
    h = bearer(SERVICE_TOKEN)
    r = c.get("/api/v1/findings", params={"limit": 101}, headers=h)
    assert r.status_code == 400 and r.json()["error"].startswith("limit: ")
    assert c.get("/api/v1/actions", params={"limit": "x"}, headers=h).status_code == 400
    assert c.get("/api/v1/audit", params={"offset": -1}, headers=h).status_code == 400
    assert c.get("/api/v1/tickets", params={"status": "weird"}, headers=h).json()["error"].startswith("status: ")
    r = c.post("/api/v1/tokens", json={"user": "x y", "role": "viewer"}, headers=h)
    assert r.status_code == 400 and r.json()["error"].startswith("user: String should match pattern")
    r = c.post("/api/v1/tokens", json={"user": "x", "role": "root"}, headers=h)
    assert r.status_code == 400 and r.json()["error"].startswith("role: ")
    r = c.post("/api/v1/tokens", content=b"{" + b" " * 70_000 + b"}", headers={**h, "Content-Type": "application/json"})
    assert r.status_code == 413


def test_a_chunked_body_is_counted_as_it_streams_and_refused_before_the_token_check(
    client: tuple[TestClient, Service],
) -> None:
    # no Content-Length (a generator is sent chunked): the bytes themselves are counted; no token at all, and the
    # answer is 413, not 401: the body limit comes before authentication
    c, _ = client

    def chunks() -> Iterator[bytes]:
        yield b'{"user": "x", "role": "viewer", "pad": "'
        for _ in range(40):
            yield b" " * 4096
        yield b'"}'

    r = c.post("/api/v1/tokens", content=chunks(), headers={"Content-Type": "application/json"})
    assert r.request.headers.get("content-length") is None
    assert r.status_code == 413
    assert r.json() == {"error": "request body over 65536 bytes"}
    small = c.post("/api/v1/tokens", content=iter([b'{"user": "x", ', b'"role": "viewer"}']))
    assert small.status_code == 401  # under the limit: on to the token check


def test_pagination(client: tuple[TestClient, Service]) -> None:
    c, svc = client
    for i in range(5):
        svc.state.audit.record(i, f"event {i}", "test", actor="t")
    h = bearer(SERVICE_TOKEN)
    first = [a["what"] for a in c.get("/api/v1/audit", params={"limit": 2}, headers=h).json()["audit"]]
    second = [a["what"] for a in c.get("/api/v1/audit", params={"limit": 2, "offset": 2}, headers=h).json()["audit"]]
    assert first == ["event 4", "event 3"] and second == ["event 2", "event 1"]


def test_anonymous_read_opens_reads_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FABRICD_TEST_PW", "pw")
    svc = Service(load_config(write(tmp_path, "  anonymous_read: true\n"), {}))
    try:
        c = TestClient(create_app(svc))
        assert c.get("/api/v1/findings").status_code == 200
        assert c.post("/api/v1/actions/1/approve").status_code == 401
    finally:
        svc.state.close()


def test_plain_http_off_loopback_needs_saying(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as e:
        load_config(write(tmp_path, "  host: 0.0.0.0\n"), {})
    assert "field 'api.host'" in str(e.value) and "api.allow_plain_http" in str(e.value)
    assert load_config(write(tmp_path, "  host: 0.0.0.0\n  allow_plain_http: true\n"), {}).api.host == "0.0.0.0"
    key = tmp_path / "k.pem"
    key.write_text("x")
    key.chmod(0o644)
    (tmp_path / "c.pem").write_text("x")
    with pytest.raises(ConfigError) as e:
        load_config(write(tmp_path, "  host: 0.0.0.0\n  tls: {cert: c.pem, key: k.pem}\n"), {})
    assert "chmod 600" in str(e.value) and "api.tls.key" in str(e.value)


def self_signed(tmp: Path, name: str = "127.0.0.1", prefix: str = "") -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 (cryptography, already installed with paramiko); with `name` another
    subject (a client's), as its own CA."""
    import datetime as dt
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = tmp / f"{prefix}cert.pem", tmp / f"{prefix}key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    key_path.chmod(0o600)
    return cert_path, key_path


def test_token_cli_creates_lists_and_revokes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    monkeypatch.setenv("FABRICD_TEST_PW", "pw")
    cfg = write(tmp_path)
    assert cli(["token", "create", "--user", "dave", "--role", "operator", "--config", str(cfg), "-f", "json"]) == 0
    made = json.loads(capsys.readouterr().out)
    assert made["token"].startswith("fabricd_") and made["role"] == "operator" and made["created_by"].startswith("cli:")
    svc = Service(load_config(cfg, {}))
    try:
        c = TestClient(create_app(svc))
        assert c.post("/api/v1/actions/5/approve", headers=bearer(made["token"])).status_code == 404  # operator
        assert cli(["token", "list", "--config", str(cfg), "-f", "json"]) == 0
        listed = json.loads(capsys.readouterr().out)["tokens"]
        assert [(t["user"], t["role"], t["revoked_ts"]) for t in listed] == [("dave", "operator", None)]
        assert made["token"] not in json.dumps(listed)
        assert cli(["token", "revoke", str(made["id"]), "--config", str(cfg)]) == 0
        assert c.get("/api/v1/findings", headers=bearer(made["token"])).status_code == 401
        assert cli(["token", "revoke", str(made["id"]), "--config", str(cfg)]) == 2  # never twice
        assert cli(["token", "create", "--user", "e", "--role", "root", "--config", str(cfg)]) == 2
        assert "--role: unknown role 'root'" in capsys.readouterr().err
    finally:
        svc.state.close()


@pytest.mark.parametrize(
    ("role", "needed", "may"),
    [("viewer", "viewer", True), ("viewer", "operator", False), ("operator", "operator", True),
     ("operator", "admin", False), ("admin", "viewer", True), ("admin", "admin", True)],
)  # fmt: skip
def test_role_table(role: str, needed: str, may: bool) -> None:
    from fabricd.service.surface.access import Principal

    assert Principal("user:x", Role.parse(role)).may(Role.parse(needed)) is may


def test_every_answer_has_a_documented_shape_and_nothing_else(client: tuple[TestClient, Service]) -> None:
    c, svc = client
    spec = c.get("/openapi.json").json()
    schemas = spec["components"]["schemas"]

    def answer(path: str, method: str = "get", code: str = "200") -> dict[str, Any]:
        ref = spec["paths"][path][method]["responses"][code]["content"]["application/json"]["schema"]["$ref"]
        doc: dict[str, Any] = schemas[ref.rsplit("/", 1)[1]]
        return doc

    def items(doc: dict[str, Any], field: str) -> dict[str, Any]:
        ref = doc["properties"][field]["items"]["$ref"]
        item: dict[str, Any] = schemas[ref.rsplit("/", 1)[1]]
        return item

    action = items(answer("/api/v1/actions"), "actions")
    assert {"id", "op", "device", "port", "status", "key"} <= set(action["properties"])
    assert set(action["properties"]["status"]["enum"]) == {
        "awaiting_approval", "running", "done", "failed", "rolled_back", "refused", "observed", "cancelled"
    }  # fmt: skip
    assert {"fault", "status", "kind", "evidence", "jobs"} <= set(
        items(answer("/api/v1/findings"), "findings")["properties"]
    )
    assert "hash" not in items(answer("/api/v1/tokens"), "tokens")["properties"]
    assert "token" in answer("/api/v1/tokens", "post", "201")["properties"]
    assert set(items(answer("/api/v1/ports/disabled"), "ports")["properties"]) == {
        "device", "port", "action_id", "ticket_id", "since_ts"
    }  # fmt: skip
    # a field the stored finding has and the API does not document stays out of the answer
    f = Finding("link_flap", "leaf-g0-r0", "Ethernet1/1", ("leaf-g0-r0",), ("leaf-g0-r0:Ethernet1/1",), 1, 2,
                "warning", 0.9, "8 flaps")  # fmt: skip
    svc.state.findings.record(f, "k1", 3)
    with svc.state.transaction() as db:
        db.execute("UPDATE findings SET data = ? WHERE fault = 'k1'", (json.dumps({**f.to_dict(), "secret": "x"}),))
    body = c.get("/api/v1/findings", headers=bearer(SERVICE_TOKEN)).json()["findings"]
    assert [x["fault"] for x in body] == ["k1"] and "secret" not in body[0] and body[0]["summary"] == "8 flaps"


def test_every_error_has_the_documented_shape(client: tuple[TestClient, Service]) -> None:
    # the router's own 404 and 405 and a body that is not UTF-8 answer {"error": ...} like every other error
    c, _ = client
    h = bearer(SERVICE_TOKEN)
    r = c.get("/api/v1/nothing-here", headers=h)
    assert r.status_code == 404
    assert r.json() == {"error": "no route /api/v1/nothing-here; the API is listed at /docs (OpenAPI at /openapi.json)"}
    r = c.options("/api/v1/tokens", headers=h)
    assert r.status_code == 405
    assert r.headers["allow"] == "GET, HEAD, POST"
    assert r.json() == {"error": "OPTIONS is not allowed on /api/v1/tokens; allowed: GET, HEAD, POST"}
    r = c.put("/api/v1/findings", headers=h)
    assert r.status_code == 405 and set(r.json()) == {"error"}
    r = c.post("/api/v1/tokens", content=b'{"user": "\xff\xfe", "role": "viewer"}',
               headers={**h, "Content-Type": "application/json"})  # fmt: skip
    assert r.status_code == 400 and set(r.json()) == {"error"}, r.text


def test_health_lists_the_actions_in_flight(client: tuple[TestClient, Service]) -> None:
    """Issue 37: after a kill -9 during an enable, the resumed enable waits for LLDP with the hold still recorded on a
    port already up, and health said only `ok`: it lists what is under way, and since when."""
    c, svc = client
    now = time.time_ns()
    a = svc.state.actions.add(
        "enable", "leaf-g0-r0", "Ethernet1/1", "auto", "running", "ticket 3 resolved", now - 4 * NS
    )
    svc.state.actions.add("disable", "leaf-g0-r0", "Ethernet2/1", "auto", "done", "flap", now)  # over: not listed
    (got,) = c.get("/api/v1/health", headers=bearer(SERVICE_TOKEN)).json()["in_flight"]
    assert (got["action_id"], got["op"], got["port"], got["mode"]) == (a.id, "enable", "leaf-g0-r0:Ethernet1/1", "auto")
    assert 4 <= got["for_s"] < 10
