"""The CLI: JSON for scripts, one-line errors with exit codes, subprocess use."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from agent_link_core.cli import build_cli
from agent_link_core.config import load_config
from agent_link_core.mailbox import Mailbox, OutgoingMessage, new_message_id
from agent_link_core.model import Caller
from agent_link_core.store import Store


def invoke(*args: str, env: dict[str, str] | None = None) -> object:
    return CliRunner().invoke(build_cli(), list(args), env=env, catch_exceptions=False)


def seed(to: str = "test:bob", body: str = "hello <bob>") -> str:
    config = load_config()
    box = Mailbox(Store(config.db_path), config)
    mid = new_message_id()
    box.store_message(OutgoingMessage(mid, Caller("test:alice", "config", "test"), to, to, body, "reply", None, None))
    return mid


def test_health_json_is_one_object(isolated_env: Path) -> None:
    result = invoke("health", "--json")
    assert result.exit_code == 0
    data = json.loads(result.output)
    assert data["stateDir"]["path"] == str(isolated_env)
    assert {"codex", "claude", "roles", "receipts"} <= set(data["plugins"]["loaded"])


def test_health_human_names_bad_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENT_LINK_REMINDER_LIMIT", "99")
    result = invoke("health")
    assert result.exit_code == 0 and "AGENT_LINK_REMINDER_LIMIT" in result.output


def test_relative_state_dir_is_a_one_line_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENT_LINK_STATE_DIR", "relative/path")
    result = CliRunner().invoke(build_cli(), ["health"])
    assert result.exit_code == 1
    assert "AGENT_LINK_STATE_DIR" in result.output and "Traceback" not in result.output


def test_plugins_json_and_disabled(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENT_LINK_DISABLE_PLUGINS", "roles")
    data = json.loads(invoke("plugins", "--json").output)
    assert "roles" in data["blocked"] and "roles" not in data["loaded"]


def test_inbox_reads_and_marks(isolated_env: Path) -> None:
    mid = seed()
    peek = json.loads(invoke("inbox", "--as", "test:bob", "--peek", "--json").output)
    assert peek["markedDelivered"] == [] and peek["messages"][0]["id"] == mid
    human = invoke("inbox", "--as", "test:bob")
    assert human.exit_code == 0 and "hello &lt;bob&gt;" in human.output and "<agent-link-message" in human.output
    again = json.loads(invoke("inbox", "--as", "test:bob", "--json").output)
    assert again["markedDelivered"] == [] and again["messages"][0]["delivery"] == "delivered"


def test_inbox_without_identity_exits_1() -> None:
    result = CliRunner().invoke(build_cli(), ["inbox"])
    assert result.exit_code == 1
    assert "AGENT_LINK_ADDRESS" in result.output


def test_bad_usage_exits_2() -> None:
    assert CliRunner().invoke(build_cli(), ["inbox", "--as", "not an address"]).exit_code == 2
    assert CliRunner().invoke(build_cli(), ["inbox", "--limit", "0"]).exit_code == 2
    assert CliRunner().invoke(build_cli(), ["no-such-command"]).exit_code == 2


def test_console_script_subprocess(isolated_env: Path) -> None:
    exe = Path(sys.executable).with_name("agent-link")
    out = subprocess.run([str(exe), "--version"], capture_output=True, text=True, timeout=60, env=dict(os.environ))
    assert out.returncode == 0 and "agent-link" in out.stdout
    hook = subprocess.run([str(exe), "hook", "nosuchhost", "Event"], input="{}", capture_output=True, text=True, timeout=60)
    assert hook.returncode == 0 and hook.stdout == ""
    seed()
    inbox = subprocess.run([str(exe), "inbox", "--json"], capture_output=True, text=True, timeout=60,
                           env=dict(os.environ, AGENT_LINK_ADDRESS="test:bob"))
    assert inbox.returncode == 0 and json.loads(inbox.stdout)["address"] == "test:bob"


def test_debug_logs_go_to_a_private_file(isolated_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import logging

    monkeypatch.setenv("AGENT_LINK_DEBUG", "1")
    logger = logging.getLogger("agent_link_core")
    before = list(logger.handlers)
    try:
        assert invoke("health", "--json").exit_code == 0
        log_file = isolated_env / "logs" / "agent-link.log"
        assert log_file.exists() and oct(log_file.stat().st_mode & 0o777) == "0o600"
        for handler in logger.handlers:
            handler.flush()
        assert "hook agent_link_schema()" in log_file.read_text()  # the hook-call trace
    finally:
        for handler in logger.handlers[len(before):]:
            handler.close()
        logger.handlers[:] = before
        logger.setLevel(logging.NOTSET)
