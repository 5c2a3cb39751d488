"""fabricd.yaml: defaults, paths, FABRICD_* overrides, errors that name file/line/field, and secrets."""

from __future__ import annotations

from pathlib import Path

import pytest

import fabricd.cli
from fabricd.service.config import ConfigError, SecretRef, load_config, read_secret
from fabricd.service.daemon import Service
from fabricd.telemetry import TelemetryClient
from tests.conftest import EXAMPLES

SECRET = "hunter2-Sup3r-s3cret"
MINIMAL = "spec: spec.yaml\ninventory: inventory.yaml\n"


def write(tmp: Path, text: str, name: str = "fabricd.yaml") -> Path:
    path = tmp / name
    path.write_text(text)
    return path


def error(path: Path, environ: dict[str, str] | None = None) -> ConfigError:
    with pytest.raises(ConfigError) as e:
        load_config(path, {} if environ is None else environ)
    return e.value


# --- defaults and paths -------------------------------------------------------------------------------------
def test_defaults_are_safe(tmp_path: Path) -> None:
    cfg = load_config(write(tmp_path, MINIMAL), {})
    assert cfg.remediation.mode == "observe"
    assert cfg.remediation.kinds == ["link_flap", "link_corruption"]
    assert cfg.remediation.drain_hook is None
    assert (cfg.api.host, cfg.api.port, cfg.api.token) == ("127.0.0.1", 8340, None)
    assert cfg.tickets.backend == "sqlite"
    s = cfg.safety
    assert (s.min_uplink_fraction, s.max_down_per_switch, s.max_down_per_rail, s.max_down_fabric) == (0.75, 2, 4, 8)
    assert s.max_actions_per_hour == 10
    assert cfg.source == tmp_path / "fabricd.yaml"
    assert cfg.state.path == tmp_path / "fabricd-state.db"  # the default is relative too: next to the file


def test_empty_file_names_the_missing_fields(tmp_path: Path) -> None:
    e = error(write(tmp_path, ""))
    assert e.field in ("spec", "inventory")
    assert "required field is missing" in str(e)


def test_relative_paths_resolve_against_the_files_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    conf = tmp_path / "etc"
    conf.mkdir()
    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    text = (
        "spec: fabric/spec.yaml\ncabling: ../asbuilt.yaml\ninventory: /abs/inventory.yaml\npolicy: policy.yaml\n"
        "state: var/state.db\ntelemetry: {record: trace.jsonl}\n"
    )
    cfg = load_config(write(conf, text), {})
    assert cfg.spec == conf / "fabric/spec.yaml"
    assert cfg.cabling == conf / "../asbuilt.yaml"
    assert cfg.inventory == Path("/abs/inventory.yaml")
    assert cfg.policy == conf / "policy.yaml"
    assert cfg.state.path == conf / "var/state.db"
    assert cfg.telemetry.record == conf / "trace.jsonl"


# --- environment overrides ----------------------------------------------------------------------------------
def test_env_overrides_beat_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, MINIMAL + "remediation: {mode: approve}\nsafety: {max_down_fabric: 5}\n")
    env = {
        "FABRICD_REMEDIATION__MODE": "auto",
        "FABRICD_SAFETY__MAX_DOWN_FABRIC": "3",
        "FABRICD_API__PORT": "9000",
        "FABRICD_LAB_PASSWORD": "not-config",  # other FABRICD_* variables are not overrides
        "FABRICD_SOURCE": "/etc/passwd",  # nor is the internal field
        "REMEDIATION__MODE": "observe",  # no prefix
    }
    cfg = load_config(path, env)
    assert cfg.remediation.mode == "auto"
    assert cfg.safety.max_down_fabric == 3
    assert cfg.api.port == 9000
    assert cfg.source == path


def test_env_overrides_come_from_os_environ_by_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FABRICD_REMEDIATION__MODE", "auto")
    assert load_config(write(tmp_path, MINIMAL)).remediation.mode == "auto"


def test_env_overrides_lists_and_nested_sections(tmp_path: Path) -> None:
    path = write(tmp_path, MINIMAL)
    cfg = load_config(path, {"FABRICD_REMEDIATION__KINDS": "link_corruption, link_flap"})
    assert cfg.remediation.kinds == ["link_corruption", "link_flap"]
    # One item is still a list.
    assert load_config(path, {"FABRICD_REMEDIATION__KINDS": "link_flap"}).remediation.kinds == ["link_flap"]
    # A section the file does not have, and a list two levels down.
    env = {
        "FABRICD_TICKETS__BACKEND": "jira",
        "FABRICD_TICKETS__JIRA__URL": "https://jira.example.com",
        "FABRICD_TICKETS__JIRA__PROJECT": "NET",
        "FABRICD_TICKETS__JIRA__USERNAME": "bot",
        "FABRICD_TICKETS__JIRA__TOKEN__ENV": "JIRA_TOKEN",
        "FABRICD_TICKETS__JIRA__DONE_STATUSES": "Done,Won't Fix",
        "JIRA_TOKEN": SECRET,
    }
    jira = load_config(path, env).tickets.jira
    assert jira is not None
    assert (jira.url, jira.project, jira.token.env) == ("https://jira.example.com", "NET", "JIRA_TOKEN")
    assert jira.done_statuses == ["Done", "Won't Fix"]


def test_env_override_keeps_commas_in_strings(tmp_path: Path) -> None:
    hook = 'scontrol update nodename={node} state=drain reason="fabricd: {reason}, port {port}"'
    cfg = load_config(write(tmp_path, MINIMAL), {"FABRICD_REMEDIATION__DRAIN_HOOK": hook})
    assert cfg.remediation.drain_hook == hook


def test_bad_env_override_names_the_variable(tmp_path: Path) -> None:
    path = write(tmp_path, MINIMAL + "remediation:\n  revert_in_s: 60\n")
    e = error(path, {"FABRICD_REMEDIATION__MODE": "sometimes"})
    assert e.field == "remediation.mode"
    assert e.line is None  # the value is not in the file: no line of it is to blame
    assert "environment variable FABRICD_REMEDIATION__MODE" in str(e)
    assert "sometimes" not in str(e)
    e = error(path, {"FABRICD_REMEDIATION__KINDS": "link_flap,pfc_storm"})
    assert e.field == "remediation.kinds[1]"
    assert "FABRICD_REMEDIATION__KINDS" in str(e)


def test_env_override_into_a_scalar_is_refused(tmp_path: Path) -> None:
    e = error(write(tmp_path, MINIMAL), {"FABRICD_SPEC__PATH": "x"})
    assert str(e) == f"{tmp_path / 'fabricd.yaml'}: FABRICD_SPEC__PATH overrides 'spec', which is not a section"


def test_drain_hook_template_checked_at_start(tmp_path: Path) -> None:
    hook = 'scontrol update nodename={node} state=drain reason="fabricd: {reason} ({device}:{port})"'
    cfg = load_config(write(tmp_path, MINIMAL + f"remediation:\n  drain_hook: '{hook}'\n"), {})
    assert cfg.remediation.drain_hook == hook
    literal = "sh -c 'echo {node} | awk \"{{print $1}}\"'"  # literal braces doubled
    cfg = load_config(write(tmp_path, MINIMAL), {"FABRICD_REMEDIATION__DRAIN_HOOK": literal})
    assert cfg.remediation.drain_hook == literal
    for bad, problem in [
        ("awk '{print $1}' {node}", "unknown placeholder {print $1}"),
        ("sh -c 'echo {node}", "not a valid command template (No closing quotation)"),
        ("echo {0}", "not a valid command template (Replacement index 0"),
        ("echo {node", "not a valid command template (expected '}' before end of string)"),
    ]:
        e = error(write(tmp_path, MINIMAL), {"FABRICD_REMEDIATION__DRAIN_HOOK": bad})
        assert e.field == "remediation.drain_hook"
        assert problem in str(e)
        assert "placeholders are {node}, {reason}, {device} and {port}; write literal braces as {{ }}" in str(e)


# --- errors name file, line and field -----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "line", "field", "problem"),
    [
        (
            MINIMAL + "remediation:\n  revert_in_s: 60\n  mode: sometimes\n",
            5,
            "remediation.mode",
            "Input should be 'observe', 'approve' or 'auto'",
        ),
        (
            MINIMAL + "remediation:\n  moed: auto\n",
            4,
            "remediation.moed",
            "unknown key; remove it or check its spelling",
        ),
        (MINIMAL + "colour: blue\n", 3, "colour", "unknown key; remove it or check its spelling"),
        (MINIMAL + "safety:\n  max_down_per_switch: -1\n", 4, "safety.max_down_per_switch", "greater than or equal"),
        (MINIMAL + "safety:\n  min_uplink_fraction: 1.5\n", 4, "safety.min_uplink_fraction", "less than or equal"),
        (MINIMAL + "remediation:\n  revert_in_s: 5\n", 4, "remediation.revert_in_s", "greater than or equal to 30"),
        (MINIMAL + "remediation:\n  kinds: [link_flap, pfc_storm]\n", 4, "remediation.kinds[1]", "Input should be"),
        (MINIMAL + "api:\n  port: http\n", 4, "api.port", "valid integer"),
        (
            MINIMAL + "telemetry:\n  intervals:\n    optic: 30\n",
            4,
            "telemetry.intervals",
            "unknown sample group 'optic'",
        ),
        (MINIMAL + "detectors:\n  pass_gap_s: -1\n", 4, "detectors.pass_gap_s", "greater than or equal to 0"),
        (MINIMAL + "detectors:\n  dci:\n    job_split: tp\n", 5, "detectors.dci.job_split", "'pp' or 'dp'"),
        (MINIMAL + "jobs:\n  path: j.yaml\n  command: [squeue]\n", 3, "jobs", "give one of path, command or"),
        (
            MINIMAL + "detectors:\n  dci:\n    raise_skew: 0.1\n    clear_skew: 0.2\n",
            4,
            "detectors.dci",
            "clear_skew must not exceed raise_skew",
        ),
        ("inventory: inventory.yaml\n", 1, "spec", "required field is missing; add it"),  # the mapping
    ],
)
def test_bad_values_name_file_line_and_field(
    tmp_path: Path, text: str, line: int | None, field: str, problem: str
) -> None:
    path = write(tmp_path, text)
    e = error(path)
    assert e.field == field
    assert e.line == line
    assert problem in e.problem
    where = str(path) if line is None else f"{path}:{line}"
    assert str(e).startswith(f"{where}: field '{field}': ")


def test_a_group_sampled_faster_than_the_base_interval_is_refused(tmp_path: Path) -> None:
    e = error(write(tmp_path, MINIMAL + "telemetry:\n  interval_s: 2\n  intervals:\n    pfc: 0.5\n"))
    assert e.field == "telemetry"
    assert "intervals {'pfc': 0.5} are shorter than interval_s (2.0 s), the staleness unit; lower interval_s" in str(e)


def test_invalid_yaml_and_non_mapping(tmp_path: Path) -> None:
    e = error(write(tmp_path, "spec: [unclosed\n"))
    assert e.line is not None and "invalid YAML" in str(e)
    e = error(write(tmp_path, "- spec\n- inventory\n"))
    assert "must be a mapping" in str(e)
    e = error(tmp_path / "missing.yaml")
    assert "file not found" in str(e)


def test_webhook_backend_needs_its_section(tmp_path: Path) -> None:
    e = error(write(tmp_path, MINIMAL + "tickets: {backend: webhook}\n"))
    assert "tickets.webhook is missing" in str(e)


# --- secrets ------------------------------------------------------------------------------------------------
def test_api_token_from_env(tmp_path: Path) -> None:
    path = write(tmp_path, MINIMAL + "api:\n  token: {env: FABRICD_TEST_API_TOKEN}\n")
    cfg = load_config(path, {"FABRICD_TEST_API_TOKEN": SECRET})
    assert cfg.api.token == SecretRef(env="FABRICD_TEST_API_TOKEN")
    assert read_secret(cfg.api.token, "api.token", path, {"FABRICD_TEST_API_TOKEN": SECRET}).get_secret_value() == (
        SECRET
    )
    assert SECRET not in repr(cfg)
    e = error(path, {})
    assert e.field == "api.token"
    assert str(e) == f"{path}: field 'api.token': environment variable FABRICD_TEST_API_TOKEN is not set"
    e = error(path, {"FABRICD_TEST_API_TOKEN": ""})
    assert "is not set" in str(e)


def test_token_file_must_be_private(tmp_path: Path) -> None:
    token = tmp_path / "api.token"
    token.write_text(SECRET + "\n")
    path = write(tmp_path, MINIMAL + "api:\n  token: {file: api.token}\n")  # relative to the config's folder
    token.chmod(0o644)
    e = error(path)
    assert e.field == "api.token"
    assert "chmod 600" in str(e) and str(token) in str(e)
    assert SECRET not in str(e)
    token.chmod(0o600)
    cfg = load_config(path, {})
    assert cfg.api.token is not None
    assert read_secret(cfg.api.token, "api.token", path).get_secret_value() == SECRET  # stripped
    token.unlink()
    e = error(path)
    assert e.field == "api.token" and "No such file or directory" in str(e)


def test_empty_or_unreadable_token_file_is_refused(tmp_path: Path) -> None:
    """An empty token would let `Authorization: Bearer ` (empty) through the API."""
    token = tmp_path / "api.token"
    token.write_text("\n")
    token.chmod(0o600)
    path = write(tmp_path, MINIMAL + "api:\n  token: {file: api.token}\n")
    e = error(path)
    assert e.field == "api.token"
    assert str(e) == f"{path}: field 'api.token': {token} is empty; write the secret into it"
    token.unlink()
    token.mkdir(mode=0o700)  # private, but not a file
    e = error(path)
    assert e.field == "api.token"
    assert str(e) == f"{path}: field 'api.token': {token}: cannot read it (IsADirectoryError)"


def test_secret_ref_needs_env_or_file(tmp_path: Path) -> None:
    e = error(write(tmp_path, MINIMAL + "api:\n  token: {}\n"))
    assert e.field == "api.token"
    assert "give env: VAR or file: PATH" in str(e)


def test_webhook_token_checked_at_start(tmp_path: Path) -> None:
    text = MINIMAL + "tickets:\n  backend: webhook\n  webhook:\n    url: https://hooks.example.com/x\n"
    e = error(write(tmp_path, text + "    token: {env: HOOK_TOKEN}\n"))
    assert e.field == "tickets.webhook.token" and "HOOK_TOKEN is not set" in str(e)
    cfg = load_config(tmp_path / "fabricd.yaml", {"HOOK_TOKEN": SECRET})
    assert cfg.tickets.webhook is not None and cfg.tickets.webhook.url == "https://hooks.example.com/x"


@pytest.mark.parametrize(
    ("text", "environ"),
    [
        # the secret written into the file instead of a reference
        (MINIMAL + f"api:\n  token: {SECRET}\n", {}),
        (MINIMAL + f"api:\n  token: {{value: {SECRET}}}\n", {}),
        # a secret passed as an override of the reference
        (MINIMAL, {"FABRICD_API__TOKEN": SECRET}),
        # a good secret and another error
        (MINIMAL + "api: {token: {env: TOK}}\nremediation: {mode: sometimes}\n", {"TOK": SECRET}),
        (MINIMAL + "api: {token: {env: TOK}}\n", {"TOK": SECRET, "FABRICD_API__PORT": "x"}),
    ],
)
def test_secret_value_never_in_errors(tmp_path: Path, text: str, environ: dict[str, str]) -> None:
    e = error(write(tmp_path, text), environ)
    assert SECRET not in str(e)
    assert SECRET not in repr(e.args)


# --- through the CLI ----------------------------------------------------------------------------------------
def test_cli_run_with_a_bad_config_exits_2_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = write(tmp_path, MINIMAL + "remediation:\n  mode: sometimes\n")
    assert fabricd.cli.main(["run", "--config", str(bad)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(f"fabricd: error: {bad}:4: field 'remediation.mode': ")


def test_cli_run_never_prints_the_secret(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    token = tmp_path / "api.token"
    token.write_text(SECRET)
    token.chmod(0o640)
    bad = write(tmp_path, MINIMAL + "api: {token: {file: api.token}}\n")
    assert fabricd.cli.main(["run", "--config", str(bad)]) == 2
    out, err = capsys.readouterr()
    assert "chmod 600" in err and "api.token" in err
    assert SECRET not in out + err


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("https://bot:hunter2@hooks.example.com/x", "must not carry user:password@"),
        ("ftp://hooks.example.com/x", "not an http(s) URL"),
        ("hooks.example.com/x", "not an http(s) URL"),
        ("ftp://bot:hunter2@hooks.example.com/x", "must not carry user:password@"),
    ],
)
def test_webhook_url_refused(tmp_path: Path, url: str, why: str) -> None:
    text = MINIMAL + f"tickets:\n  backend: webhook\n  webhook:\n    url: {url}\n"
    e = error(write(tmp_path, text))
    assert "tickets.webhook.url" in str(e) and why in str(e)
    assert "hunter2" not in str(e)  # the refusal must not echo the credential it refuses


@pytest.mark.parametrize("spread", [True, False])
def test_spread_samples_reaches_the_telemetry_client(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spread: bool
) -> None:
    monkeypatch.setenv("FABRICD_TEST_PW", SECRET)
    write(
        tmp_path,
        "fabric: small-pod\ndefaults: {username: admin, password_env: FABRICD_TEST_PW, gnmi: {tls: false}}\n"
        "devices:\n  leaf-g0-r0: {host: 127.0.0.1}\n  spine-r0-0: {host: 127.0.0.1}\n",
        "inventory.yaml",
    )
    text = f"spec: {EXAMPLES / 'small-pod.yaml'}\ninventory: inventory.yaml\n"
    cfg = load_config(write(tmp_path, text + ("" if spread else "telemetry: {spread_samples: false}\n")), {})
    assert cfg.telemetry.spread_samples is spread
    svc = Service(cfg)
    try:
        assert isinstance(svc.telemetry, TelemetryClient)
        phases = [d.phase_ns for d in svc.telemetry._devices.values()]
        assert len(phases) == 2 and all((p is not None) is spread for p in phases)
    finally:
        svc.state.close()


def test_optics_trend_settings_reach_the_detector(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FABRICD_TEST_PW", SECRET)
    write(
        tmp_path,
        "fabric: small-pod\ndefaults: {username: admin, password_env: FABRICD_TEST_PW, gnmi: {tls: false}}\n"
        "devices:\n  leaf-g0-r0: {host: 127.0.0.1}\n",
        "inventory.yaml",
    )
    text = f"spec: {EXAMPLES / 'small-pod.yaml'}\ninventory: inventory.yaml\n"
    text += "detectors:\n  optics_trend: {threshold_dbm: -9.5, temp_limit_c: 75}\n"
    svc = Service(load_config(write(tmp_path, text), {}))
    try:
        (state,) = [s for d, s in zip(svc.runner.detectors, svc.runner.states, strict=True) if d.name == "optics_trend"]
        assert state.config.threshold_dbm == -9.5 and state.config.temp_limit_c == 75
        assert state.config.ber_limit == 2.4e-4  # what was not set keeps its default
    finally:
        svc.state.close()
    with pytest.raises(ConfigError) as e:
        load_config(write(tmp_path, text.replace("-9.5", "-90")), {})
    assert "detectors.optics_trend.threshold_dbm" in str(e.value)


# --- shared state and hot standby -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "field", "why"),
    [
        ("state: {url: 'postgresql://fabricd:hunter2@db1/fabricd'}\n", "state.url",
         "give it as state.password"),
        ("state: {url: 'mysql://db1/fabricd'}\n", "state.url", "must be a postgresql:// URL"),
        ("ha: {enabled: true}\n", "", "ha.enabled needs state.url (PostgreSQL)"),
        ("state: {url: 'postgresql://fabricd@db1/fabricd'}\nha: {enabled: true}\nbus: {urls: ['nats://u:hunter2@n1']}\n",
         "bus.urls", "carries credentials; give bus.user and bus.password"),
        ("state: {url: 'postgresql://fabricd@db1/fabricd'}\nha: {enabled: true}\nbus: {urls: []}\n", "bus.urls",
         "at least one NATS URL"),
        ("state: {url: 'postgresql://fabricd@db1/fabricd'}\nha: {enabled: true, lease_ttl_s: 0.2}\n",
         "ha.lease_ttl_s", "greater than or equal to 0.5"),
    ],
)  # fmt: skip
def test_state_and_ha_settings_refused(tmp_path: Path, text: str, field: str, why: str) -> None:
    e = error(write(tmp_path, MINIMAL + text))
    assert field in str(e) and why in str(e), str(e)
    assert "hunter2" not in str(e)


def test_state_url_with_its_password_from_a_file(tmp_path: Path) -> None:
    secret = tmp_path / "pg.pass"
    secret.write_text("s3cret\n")
    secret.chmod(0o600)
    text = MINIMAL + (
        "state: {url: 'postgresql://fabricd@db1:5432/fabricd', password: {file: pg.pass}}\n"
        "ha: {enabled: true, instance: ctl-1}\nbus: {urls: ['nats://n1:4222', 'nats://n2:4222']}\n"
    )
    cfg = load_config(write(tmp_path, text), {})
    assert cfg.state.url == "postgresql://fabricd@db1:5432/fabricd"
    assert cfg.ha.enabled and cfg.ha.instance == "ctl-1" and cfg.ha.lease_ttl_s == 0.6
    assert cfg.bus.urls == ["nats://n1:4222", "nats://n2:4222"]
    secret.chmod(0o644)
    assert "chmod" in str(error(write(tmp_path, text))) or "readable" in str(error(write(tmp_path, text)))
