"""Who may use the app: anyone on this machine when it listens on loopback; a login otherwise.

A host other than loopback (`--host 0.0.0.0`, a LAN address, a host name) exposes the app, so `serve` refuses to
start without credentials for Gradio's login (`ui.auth_file`, or `ui.auth_user` + `ui.auth_password`, e.g. from
RAG_UI_AUTH_USER / RAG_UI_AUTH_PASSWORD) and without a bearer token for the OpenAI-compatible API
(`ui.api_token`), saying how to set them. Switching the model changes it for every user, so it is an admin
setting (`ui.model_switch`): on by default on loopback, off when exposed unless set to "on".

Not here: the login itself (Gradio's) and the API's token check (ui/api.py).
"""

from __future__ import annotations

import ipaddress
from pathlib import Path

from rag.config import UI
from rag.records import ConfigError

HOW = ("set a login with RAG_UI_AUTH_USER and RAG_UI_AUTH_PASSWORD (or ui.auth_file, a file of user:password "
       "lines) and an API token with RAG_UI_API_TOKEN, or listen on 127.0.0.1")


def is_loopback(host: str) -> bool:
    """127.0.0.0/8, ::1 and "localhost" only: "0.0.0.0" and "::" listen on every interface."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip().strip("[]")).is_loopback
    except ValueError:
        return False  # a host name resolves to whatever it resolves to: exposed


def credentials(ui: UI) -> list[tuple[str, str]]:
    """The logins from `ui.auth_file` and `ui.auth_user`/`ui.auth_password`; ConfigError naming a bad line."""
    out: list[tuple[str, str]] = []
    if ui.auth_file:
        path = Path(ui.auth_file).expanduser()
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as e:
            raise ConfigError(f"ui.auth_file: cannot read {path} ({e})") from None
        for n, line in enumerate(lines, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            user, sep, password = line.partition(":")
            if not sep or not user.strip() or not password:
                raise ConfigError(f"{path}:{n}: expected user:password")  # never echo the line: it may be one
            out.append((user.strip(), password))
        if not out:
            raise ConfigError(f"ui.auth_file: {path} holds no user:password line")
    if bool(ui.auth_user) != bool(ui.auth_password):
        raise ConfigError("ui.auth_user and ui.auth_password: set both or neither")
    if ui.auth_user:
        out.append((ui.auth_user, ui.auth_password))
    return out


def check_access(ui: UI, api: bool = True) -> list[tuple[str, str]] | None:
    """The logins to require (None: no login), or ConfigError when an exposed app would have no access control.
    `api`: the OpenAI-compatible API is served too, so an exposed app needs its token as well."""
    logins = credentials(ui)
    if is_loopback(ui.host):
        return logins or None
    missing = [what for what, ok in (("login", logins), ("API token", not api or ui.api_token)) if not ok]
    if missing:
        raise ConfigError(f"ui.host {ui.host!r} exposes the app beyond this machine, and it has no "
                          f"{' and no '.join(missing)}: {HOW}")
    return logins


def model_switch_allowed(ui: UI) -> bool:
    """Whether the model picker may switch the model (for every user)."""
    return ui.model_switch == "on" or (ui.model_switch == "auto" and is_loopback(ui.host))
