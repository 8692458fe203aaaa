"""Reminders as extension points: the core decides what is due and who wins each reminder
(``claim_reminders``), prompt-hook adapters come from ``agent_link_register_prompt_hooks``
through a registry that is rebuilt whenever the installed or disabled plugins change."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent_link_core import hookimpl
from agent_link_core.app import App
from agent_link_core.hook import HookContext, claim_reminders, disabled_names, fingerprint, refresh_registry, registry_path
from agent_link_core.mailbox import new_message_id
from agent_link_core.records import OutgoingMessage
from agent_link_core.model import Caller
from agent_link_core.records import PromptHook

from agent_link_testing.dists import install_dist

# These tests install plugins of their own (a dist on PYTHONPATH) or check the installed ones.
pytestmark = pytest.mark.installed_plugins

ALICE = Caller("test:alice", "config", "test")
PLUGIN = """
from agent_link_core import hookimpl
from agent_link_core.records import PromptHook


@hookimpl
def agent_link_register_prompt_hooks(register):
    register(PromptHook("test-host", "agent_link_testhost.hook"))
"""
ADAPTER = """
def handle(event, payload, ctx):
    note = ctx.pending_note(payload.get("address", ""))
    return {"context": note} if note else None
"""


def install_plugin(site: Path) -> Path:
    return install_dist(site, "agent_link_testhost", {"plugin.py": PLUGIN, "hook.py": ADAPTER},
                        entry_name="test-host", entry_module="agent_link_testhost.plugin")


def run_hook(site: Path, host: str, event: str, payload: dict[str, Any], extra_env: dict[str, str] | None = None) -> Any:
    env = dict(os.environ, PYTHONPATH=str(site), **(extra_env or {}))
    return subprocess.run([sys.executable, "-m", "agent_link_core", "hook", host, event], input=json.dumps(payload),
                          capture_output=True, text=True, env=env, timeout=60, check=False)


TARGET = "fake-host:s1"


@pytest.fixture
def app(isolated_env: Path) -> Iterator[App]:
    app = App.create(env={**os.environ, "AGENT_LINK_DISABLE_PLUGINS": "codex claude roles receipts"})
    try:
        yield app
    finally:
        asyncio.run(app.aclose())


def delivered(app: App, to: str = TARGET, anticipation: str = "reply", ago_ms: int = 31_000) -> str:
    row, _ = app.mailbox.store_message(OutgoingMessage(new_message_id(), ALICE, to, to, "SECRET BODY", anticipation, None, None))
    app.mailbox.mark_delivered(row["id"], "test-push")
    with app.store.write() as conn:  # delivered long enough ago for reminder 1 to be due
        conn.execute("UPDATE messages SET first_delivered_at = first_delivered_at - ?, delivered_at = delivered_at - ? WHERE id = ?",
                     (ago_ms, ago_ms, row["id"]))
    return row["id"]


def test_due_reminders_are_claimed_once_and_never_show_a_body(app: App) -> None:
    mid = delivered(app)
    delivered(app, anticipation="fyi")  # fyi mail is never reminded
    claimed = claim_reminders(app.mailbox, TARGET, "fake-host-push")
    assert claimed is not None and claimed[0] == [(mid, 1)]
    assert "reminder 1 of 3" in claimed[1] and "test:alice" in claimed[1] and "SECRET BODY" not in claimed[1]
    assert app.mailbox.state(app.mailbox.get_row(mid)).reminder_count == 1
    assert claim_reminders(app.mailbox, TARGET, "fake-host-push") is None  # reminder 2 is not due for another interval
    assert HookContext(app.config).due_reminder_note(TARGET, "fake-host-prompt-hook") is None


def test_a_reminder_no_push_showed_is_the_prompt_hooks(app: App) -> None:
    mid = delivered(app)
    note = HookContext(app.config).due_reminder_note(TARGET, "fake-host-prompt-hook")
    assert note and "reminder 1 of 3" in note
    assert app.mailbox.state(app.mailbox.get_row(mid)).reminder_count == 1
    assert claim_reminders(app.mailbox, TARGET, "fake-host-push") is None  # ... and a push then finds nothing left


def test_claim_is_exactly_once_across_processes(app: App, monkeypatch: pytest.MonkeyPatch) -> None:
    mid = delivered(app)
    stale = app.mailbox.due_reminders(TARGET)  # what another process read before this one claimed
    won = claim_reminders(app.mailbox, TARGET, "a")
    assert won is not None and won[0] == [(mid, 1)]
    monkeypatch.setattr(app.mailbox, "due_reminders", lambda *args: stale)
    assert claim_reminders(app.mailbox, TARGET, "b") is None


# -- the prompt-hook registry ---------------------------------------------------------------

def test_registration_is_validated_and_names_the_plugin(isolated_env: Path) -> None:
    class Bad:
        @hookimpl
        def agent_link_register_prompt_hooks(self, register: Any) -> None:
            register(PromptHook("Bad_Name", "x.hook"))

    app = App.create(env={**os.environ, "AGENT_LINK_DISABLE_PLUGINS": "codex claude roles receipts"}, extra_plugins=(("bad", Bad()),))
    try:
        assert "Bad_Name" not in app.hooks.prompt_hooks()  # refused, and the plugin left out
        (problem,) = [p for p in app.hooks.boundary.report() if p["plugin"] == "bad"]
        assert "Bad_Name" in problem["error"] and problem["hook"] == "agent_link_register_prompt_hooks"
    finally:
        asyncio.run(app.aclose())


def test_installed_plugins_adapters_are_registered(isolated_env: Path) -> None:
    app = App.create()
    try:
        found = {name: (hook.module, plugin) for name, (hook, plugin) in app.hooks.prompt_hooks().items()}
    finally:
        asyncio.run(app.aclose())
    assert found["codex"] == ("agent_link_codex.hook", "codex")
    assert found["claude"] == ("agent_link_claude.hook", "claude")


def seed_mail(to: str = "test:bob") -> None:
    app = App.create(env={**os.environ, "AGENT_LINK_DISABLE_PLUGINS": "codex claude roles receipts"})
    try:
        app.mailbox.store_message(OutgoingMessage(new_message_id(), ALICE, to, to, "SECRET BODY", "reply", None, None))
    finally:
        asyncio.run(app.aclose())


def registry_of(state: Path) -> dict[str, Any]:
    files = list((state / "prompt-hooks").glob("*.json"))
    assert len(files) == 1
    return dict(json.loads(files[0].read_text()))


def test_a_removed_plugin_never_runs_from_a_stale_registry(tmp_path: Path, isolated_env: Path) -> None:
    site = tmp_path / "site"
    dist = install_plugin(site)
    seed_mail()
    first = run_hook(site, "test-host", "Prompt", {"address": "test:bob"})
    assert "context" in json.loads(first.stdout)
    assert "test-host" in registry_of(isolated_env)["adapters"]
    shutil.rmtree(dist)  # uninstalled as pip does; the module files themselves are left behind
    second = run_hook(site, "test-host", "Prompt", {"address": "test:bob"})
    assert second.returncode == 0 and second.stdout == ""
    assert "test-host" not in registry_of(isolated_env)["adapters"]


def test_a_plugin_installed_later_is_found(tmp_path: Path, isolated_env: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    seed_mail()
    assert run_hook(site, "test-host", "Prompt", {"address": "test:bob"}).stdout == ""
    install_plugin(site)
    assert "context" in json.loads(run_hook(site, "test-host", "Prompt", {"address": "test:bob"}).stdout)


def test_disabling_after_the_registry_was_built(tmp_path: Path, isolated_env: Path) -> None:
    site = tmp_path / "site"
    install_plugin(site)
    seed_mail()
    assert run_hook(site, "test-host", "Prompt", {"address": "test:bob"}).stdout
    off = run_hook(site, "test-host", "Prompt", {"address": "test:bob"}, {"AGENT_LINK_DISABLE_PLUGINS": "test-host"})
    assert off.stdout == ""
    assert run_hook(site, "test-host", "Prompt", {"address": "test:bob"}).stdout  # and back on


def test_registry_is_private_and_a_corrupt_one_is_rebuilt(tmp_path: Path, isolated_env: Path) -> None:
    site = tmp_path / "site"
    install_plugin(site)
    seed_mail()
    run_hook(site, "test-host", "Prompt", {"address": "test:bob"})
    path = next((isolated_env / "prompt-hooks").glob("*.json"))
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    path.write_text("{not json")
    assert run_hook(site, "test-host", "Prompt", {"address": "test:bob"}).stdout
    assert "test-host" in registry_of(isolated_env)["adapters"]


def test_the_server_refreshes_the_registry(isolated_env: Path) -> None:
    isolated_env.mkdir(parents=True)
    app = App.create()
    try:
        refresh_registry(app.config.state_dir, app.hooks)
    finally:
        asyncio.run(app.aclose())
    data = registry_of(isolated_env)
    assert data["fingerprint"] == fingerprint(disabled_names())
    assert data["adapters"]["codex"] == {"module": "agent_link_codex.hook", "plugin": "codex"}


def test_each_python_environment_has_its_own_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "prefix", "/opt/env-a")
    a = registry_path("/s")
    monkeypatch.setattr(sys, "prefix", "/opt/env-b")
    assert a.startswith("/s/prompt-hooks/") and a != registry_path("/s")
