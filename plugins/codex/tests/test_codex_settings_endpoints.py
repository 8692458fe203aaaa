"""Settings (names, aliases, defaults), endpoint ids, the endpoint registry and candidate order."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from agent_link_codex.endpoints import (
    REGISTRY_CAPACITY,
    EndpointRegistry,
    canonical_socket,
    configured,
    endpoint_id,
    explicit,
    socket_endpoint,
    url_endpoint,
)
from agent_link_codex.schema import MIGRATIONS
from agent_link_codex.settings import SETTINGS, control_socket
from agent_link_core.app import App
from agent_link_core.config import load_config
from agent_link_core.errors import AgentLinkError
from agent_link_core.store import CORE_MIGRATIONS, Store

# Every Codex variable of the earlier tool's settings (docs/behaviour.md §23), with its aliases.
REFERENCE = {
    "AGENT_LINK_CODEX_URL": ("CODEX_AGENT_LINK_URL", "CODEX_APP_SERVER_URL"),
    "AGENT_LINK_CODEX_SOCK": ("CODEX_AGENT_LINK_SOCK", "CODEX_APP_SERVER_SOCK"),
    "AGENT_LINK_CODEX_AUTOSTART": ("CODEX_AGENT_LINK_AUTOSTART",),
    "AGENT_LINK_CODEX_BIN": ("CODEX_AGENT_LINK_CODEX_BIN", "CODEX_BIN"),
    "AGENT_LINK_CODEX_APP_SERVER_BIN": ("CODEX_AGENT_LINK_APP_SERVER_BIN", "CODEX_APP_SERVER_BIN"),
    "AGENT_LINK_CODEX_TRANSPORT": ("CODEX_AGENT_LINK_APP_SERVER_TRANSPORT",),
    "AGENT_LINK_CODEX_IDLE_MS": ("CODEX_AGENT_LINK_APP_SERVER_IDLE_MS",),
    "AGENT_LINK_CODEX_STARTUP_TIMEOUT_MS": ("CODEX_AGENT_LINK_APP_SERVER_STARTUP_MS",),
    "AGENT_LINK_MANAGED_DIR": ("CODEX_AGENT_LINK_STATE_DIR",),
    "AGENT_LINK_CODEX_REMINDERS": (),
    "AGENT_LINK_CODEX_DESKTOP_PUSH": (),
    "AGENT_LINK_GUI_OPEN_DRY_RUN": (),
}


def test_every_reference_variable_is_declared_with_its_aliases() -> None:
    declared = {s.name: s.aliases for s in SETTINGS}
    for name, aliases in REFERENCE.items():
        assert declared[name] == aliases, name
    cfg = load_config({"HOME": "/home/u"}, SETTINGS)
    assert cfg.get("AGENT_LINK_CODEX_AUTOSTART") is True and cfg.get("AGENT_LINK_CODEX_IDLE_MS") == 300_000
    assert cfg.get("AGENT_LINK_CODEX_TRANSPORT") == "unix" and cfg.get("AGENT_LINK_CODEX_DESKTOP_PUSH") == "mailbox-only"
    assert cfg.get("AGENT_LINK_CODEX_STARTUP_TIMEOUT_MS") == 15_000 and cfg.get("AGENT_LINK_CODEX_REMINDERS") is True


def test_aliases_bare_program_names_and_health_report(isolated_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CODEX_BIN", "codex")  # a bare name is fine (no "absolute path" rule)
    monkeypatch.setenv("CODEX_APP_SERVER_SOCK", "relative/app.sock")
    monkeypatch.setenv("AGENT_LINK_CODEX_AUTOSTART", "off")
    monkeypatch.setenv("CODEX_AGENT_LINK_AUTOSTART", "on")
    monkeypatch.setenv("AGENT_LINK_CODEX_IDLE_MS", "-5")
    with pytest.raises(AgentLinkError) as refused:  # out of range: refused naming value and range, as every setting
        App.create()
    assert "AGENT_LINK_CODEX_IDLE_MS='-5' is invalid: expected a whole number from 0 to 86400000" in refused.value.message
    monkeypatch.delenv("AGENT_LINK_CODEX_IDLE_MS")
    app = App.create()
    try:
        assert app.config.get("AGENT_LINK_CODEX_BIN") == "codex"
        assert app.config.get("AGENT_LINK_CODEX_AUTOSTART") is False  # the canonical name wins
        env = app.health()["env"]
        assert {"name": "CODEX_BIN", "canonical": "AGENT_LINK_CODEX_BIN"} in env["deprecated"]
        assert {"canonical": "AGENT_LINK_CODEX_AUTOSTART", "winner": "AGENT_LINK_CODEX_AUTOSTART",
                "ignored": "CODEX_AGENT_LINK_AUTOSTART"} in env["conflicts"]
        [sock] = [e for e in configured(app.config.values, app.env)[0] if e.source == "env-sock"]
        assert sock.target == os.path.join(os.path.realpath(os.getcwd()), "relative/app.sock")
    finally:
        app.close()


def test_endpoint_ids_are_stable_and_canonical(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    a = socket_endpoint(str(real / "x.sock"), "registered")
    b = socket_endpoint(str(tmp_path / "link" / "x.sock"), "env-sock")  # same socket through a symlinked dir
    c = socket_endpoint(str(real / "sub" / ".." / "x.sock"), "registered")
    assert a.id == b.id == c.id == endpoint_id(canonical_socket(str(real / "x.sock")))
    assert a.id.startswith("ep_") and len(a.id) == 19
    assert url_endpoint("WS://LocalHost:4500", "env-url").id == url_endpoint("ws://localhost:4500/", "env-url").id
    with pytest.raises(ValueError):
        url_endpoint("http://localhost:1/", "env-url")


def test_candidates_in_order_and_bad_url_reported() -> None:
    values = {"AGENT_LINK_CODEX_URL": "ws://127.0.0.1:9/", "AGENT_LINK_CODEX_SOCK": "/run/x.sock"}
    found, problems = configured(values, {"CODEX_HOME": "/h/.codex"})
    assert [e.source for e in found] == ["env-url", "env-sock", "control-socket"]
    assert found[2].target == str(control_socket({"CODEX_HOME": "/h/.codex"})) == "/h/.codex/app-server-control/app-server-control.sock"
    assert explicit(values) and not explicit({})
    found, problems = configured({"AGENT_LINK_CODEX_URL": "not a url"}, {"CODEX_HOME": "/h/.codex"})
    assert [e.source for e in found] == ["control-socket"]
    assert problems == [{"source": "env-url", "target": "not a url", "reason": "invalid-url"}]


@pytest.fixture
def registry(tmp_path: Path) -> EndpointRegistry:
    return EndpointRegistry(Store(tmp_path / "state" / "db.sqlite", (*CORE_MIGRATIONS, *MIGRATIONS)))


def test_registry_add_list_remove(registry: EndpointRegistry, tmp_path: Path) -> None:
    path = tmp_path / "srv.sock"
    with socket.socket(socket.AF_UNIX) as listener:
        listener.bind(str(path))
        ep = registry.add(str(path), label="tui")
        assert (ep.kind, ep.source, ep.label, ep.target) == ("unix", "registered", "tui", canonical_socket(str(path)))
        assert registry.add(f"unix://{path}", label="renamed").id == ep.id  # idempotent, same id
    later = registry.add(str(tmp_path / "not-running-yet.sock"))
    token = tmp_path / "token"
    token.write_text("secret")
    token.chmod(0o600)
    web = registry.add("ws://127.0.0.1:4500", token_file=str(token))
    assert [e.id for e in registry.list()] == [ep.id, later.id, web.id]
    assert registry.get(str(path)).label == "renamed" and registry.get(web.id).token_file == str(token)
    assert registry.remove(ep.id) and registry.remove(f"unix://{tmp_path / 'not-running-yet.sock'}")
    assert not registry.remove(ep.id)
    assert [e.id for e in registry.list()] == [web.id]
    # the database holding it is private
    assert os.stat(registry.store.path).st_mode & 0o777 == 0o600


def test_registry_refusals_and_capacity(registry: EndpointRegistry, tmp_path: Path) -> None:
    def refused(target: str, rule: str) -> None:
        with pytest.raises(AgentLinkError) as info:
            registry.add(target)
        assert info.value.code == "invalid_arguments" and info.value.details["errors"][0]["rule"] == rule

    refused("relative.sock", "absolute_path")
    (tmp_path / "plain-file").write_text("x")
    refused(str(tmp_path / "plain-file"), "socket")
    refused("ws://", "format")
    for i in range(REGISTRY_CAPACITY):
        registry.add(str(tmp_path / f"s{i}.sock"))
    refused(str(tmp_path / "one-too-many.sock"), "capacity")
    registry.add(str(tmp_path / "s0.sock"), label="still updatable")
    assert len(registry.list()) == REGISTRY_CAPACITY


@pytest.mark.parametrize(
    ("url", "mode", "env", "refusal"),
    [
        ("ws://10.1.2.3:4500/", 0o600, {}, "clear text"),
        ("ws://example.com:4500/", 0o600, {"AGENT_LINK_CODEX_REMOTE_TOKENS": "1"}, "clear text"),
        ("wss://example.com:4500/", 0o600, {}, "AGENT_LINK_CODEX_REMOTE_TOKENS=1"),
        ("ws://127.0.0.1:4500/", 0o644, {}, "other users"),
        ("ws://localhost:4500/", 0o640, {}, "other users"),
        ("wss://example.com:4500/", 0o600, {"AGENT_LINK_CODEX_REMOTE_TOKENS": "1"}, None),
        ("ws://[::1]:4500/", 0o600, {}, None),
        ("ws://127.0.0.2:4500/", 0o600, {}, None),
    ],
)
def test_tokens_go_only_to_loopback_from_private_files(
    registry: EndpointRegistry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, url: str, mode: int,
    env: dict[str, str], refusal: str | None,
) -> None:
    from agent_link_codex.endpoints import TokenRefused, read_token

    for name, value in env.items():
        monkeypatch.setenv(name, value)
    token = tmp_path / "token"
    token.write_text("secret\n")
    token.chmod(mode)
    if refusal is None:
        ep = registry.add(url, token_file=str(token))
        assert read_token(ep) == "secret"
        return
    with pytest.raises(AgentLinkError) as refused:
        registry.add(url, token_file=str(token))
    assert refusal in refused.value.message and refused.value.code == "invalid_arguments"
    # An endpoint named by settings (or registered before) is checked again when used.
    with pytest.raises(TokenRefused):
        read_token(url_endpoint(url, "env-url", str(token)))
