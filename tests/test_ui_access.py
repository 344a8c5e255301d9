"""Exposure: an app listening beyond loopback needs a login (and an API token) or refuses to start, saying how; it
then asks for the login; switching the model is an admin setting, off when exposed unless enabled."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from helpers import ROOT, free_port
from test_ui_limits import SlowAssistant

from rag.config import Settings, load
from rag.records import ConfigError
from ui import access
from ui import app as U


def _ui(tmp_path: Path, **flags: object) -> Settings:
    return load(flags={"paths.data_dir": tmp_path / "data", **{f"ui.{k}": v for k, v in flags.items()}}, env={})


@pytest.mark.parametrize("host, loopback", [("127.0.0.1", True), ("127.0.0.2", True), ("::1", True),
                                            ("localhost", True), ("0.0.0.0", False), ("::", False),
                                            ("192.168.1.20", False), ("my-box.lan", False)])
def test_which_hosts_are_loopback(host: str, loopback: bool) -> None:
    assert access.is_loopback(host) is loopback


def test_the_app_listens_on_loopback_by_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from rag.cli import build_parser, settings_from

    monkeypatch.chdir(tmp_path)  # no ./rag.toml
    for var in [v for v in os.environ if v.startswith("RAG_")]:
        monkeypatch.delenv(var)
    assert load(env={}).ui.host == "127.0.0.1"
    assert settings_from(build_parser().parse_args(["serve"])).ui.host == "127.0.0.1"


def test_an_exposed_app_needs_a_login_and_an_api_token(tmp_path: Path) -> None:
    assert access.check_access(_ui(tmp_path).ui) is None  # loopback, nothing set: no login
    with pytest.raises(ConfigError, match=r"ui.host '0.0.0.0' exposes the app .* no login and no API token: "
                                          r"set a login with RAG_UI_AUTH_USER and RAG_UI_AUTH_PASSWORD"):
        access.check_access(_ui(tmp_path, host="0.0.0.0").ui)
    with pytest.raises(ConfigError, match="has no API token: .*RAG_UI_API_TOKEN"):
        access.check_access(_ui(tmp_path, host="0.0.0.0", auth_user="ann", auth_password="pw").ui)
    exposed = _ui(tmp_path, host="0.0.0.0", auth_user="ann", auth_password="pw", api_token="t0k")
    assert access.check_access(exposed.ui) == [("ann", "pw")]
    # Without the API mounted (the UI alone), the login is enough.
    assert access.check_access(_ui(tmp_path, host="0.0.0.0", auth_user="ann", auth_password="pw").ui,
                               api=False) == [("ann", "pw")]


def test_logins_from_a_credentials_file(tmp_path: Path) -> None:
    good = tmp_path / "logins"
    good.write_text("# who may log in\nann:first pass\n\nbob: b:c\n")
    assert access.credentials(_ui(tmp_path, auth_file=str(good)).ui) == [("ann", "first pass"), ("bob", " b:c")]
    bad = tmp_path / "bad"
    bad.write_text("ann:ok\nsecret-without-colon\n")
    with pytest.raises(ConfigError, match=rf"{bad}:2: expected user:password$") as e:
        access.credentials(_ui(tmp_path, auth_file=str(bad)).ui)
    assert "secret-without-colon" not in str(e.value)  # a malformed line may be a password: never echoed
    with pytest.raises(ConfigError, match="set both or neither"):
        access.credentials(_ui(tmp_path, auth_user="ann").ui)
    with pytest.raises(ConfigError, match="cannot read"):
        access.credentials(_ui(tmp_path, auth_file=str(tmp_path / "missing")).ui)


def test_serve_on_an_exposed_host_without_a_login_refuses_before_any_work(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAG_")}
    data = tmp_path / "data"
    done = subprocess.run([sys.executable, "-m", "rag", "serve", "--host", "0.0.0.0", "--data-dir", str(data)],
                          cwd=tmp_path, env={**env, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 2, done.stderr
    line = done.stderr.strip()
    assert "\n" not in line and line.startswith("error: ui.host '0.0.0.0' exposes the app"), line
    assert "RAG_UI_AUTH_USER" in line and "RAG_UI_API_TOKEN" in line
    assert not data.exists()  # nothing ingested, no model loaded


def test_an_exposed_app_asks_for_the_login(tmp_path: Path) -> None:
    settings = _ui(tmp_path, host="0.0.0.0", auth_user="ann", auth_password="s3cret")
    fake = SlowAssistant(settings)
    fake.release.set()
    app = U.build_app(fake, settings)  # type: ignore[arg-type]
    port = free_port()
    U.launch(app, settings, port=port, block=False)  # the UI alone: the login is enough
    url = f"http://127.0.0.1:{port}"
    try:
        fn = next(i for i, d in app.fns.items() if d.api_name == "chat")
        body = {"data": ["q", None, None], "fn_index": fn, "session_hash": "s", "event_data": None,
                "trigger_id": None}
        assert httpx.get(f"{url}/config", timeout=10).status_code == 401
        assert httpx.post(f"{url}/gradio_api/queue/join", json=body, timeout=10).status_code == 401
        with httpx.Client(base_url=url, timeout=10) as client:
            wrong = client.post("/login", data={"username": "ann", "password": "nope"})
            assert wrong.status_code == 400 and client.get("/config").status_code == 401
            assert client.post("/login", data={"username": "ann", "password": "s3cret"}).status_code == 200
            assert client.get("/config").status_code == 200
            assert client.post("/gradio_api/queue/join", json=body).status_code == 200
    finally:
        app.close()


def _switch_fns(app: object) -> list[str]:
    return [d.name for d in app.fns.values() if d.name == "change_model"]  # type: ignore[attr-defined]


@pytest.mark.parametrize("host, switch, allowed", [("127.0.0.1", "auto", True), ("0.0.0.0", "auto", False),
                                                   ("0.0.0.0", "on", True), ("127.0.0.1", "off", False)])
def test_model_switching_is_an_admin_setting(tmp_path: Path, host: str, switch: str, allowed: bool) -> None:
    settings = _ui(tmp_path, host=host, model_switch=switch)
    fake = SlowAssistant(settings)
    h = U.Handlers(fake, settings)  # type: ignore[arg-type]
    assert h.model_switch is allowed and access.model_switch_allowed(settings.ui) is allowed
    app = U.build_app(fake, settings)  # type: ignore[arg-type]
    assert bool(_switch_fns(app)) is allowed  # no event to call when it is off
    picker = next(c for c in app.blocks.values() if type(c).__name__ == "Dropdown" and "Model" in str(c.label))
    assert picker.interactive is allowed
    if not allowed:  # a request that comes anyway changes nothing
        h.models["other.gguf"] = "/models/other.gguf"
        label, status = list(h.change_model("other.gguf"))[-1]
        assert label == h.model_label != "other.gguf" and "admin setting" in status
