"""``--source`` of ``agent-link sessions``, ``who`` and ``find`` (the listings plugin) takes a known source kind: one
a listed harness declares (``Harness.source_kinds``) or a listed session has. Any other value
is refused in one line naming the known ones (exit 2), not answered with an empty list."""

from __future__ import annotations

import json
from typing import Any

import pytest
from click.testing import CliRunner

from agent_link_core import cli as cli_mod
from agent_link_core import hookimpl
from agent_link_core.harness import Harness, SessionListing
from agent_link_core.model import Session
from agent_link_testing.cli_identity import named_address_env
from agent_link_testing.cli_plugins import add_cli_plugins


class KindsHarness(Harness):
    """Two sessions: one started from a terminal (source ``cli``), one of an undeclared kind."""

    name = "kx"
    source_kinds = ("cli", "batch", "app")

    async def list_sessions(self, *, include_archived: bool = False, limit: int = 200) -> SessionListing:
        return SessionListing([Session("kx:one", "kx", "one", title="one", surface=("app",), extra={"source": "cli"}),
                               Session("kx:two", "kx", "two", title="two", surface=("app",), extra={"source": "newKind"})],
                              {"available": True, "reason": None})

    async def get_session(self, session_id: str) -> Session | None:
        return next((s for s in (await self.list_sessions()).sessions if s.id == session_id), None)


class Plugin:
    @hookimpl
    def agent_link_register_harnesses(self, register: Any) -> None:
        register(KindsHarness())


@pytest.fixture(autouse=True)
def harness(monkeypatch: pytest.MonkeyPatch) -> None:
    add_cli_plugins(monkeypatch, Plugin())


def run(*args: str) -> Any:
    return CliRunner().invoke(cli_mod.build_cli(), list(args), env=named_address_env(args), catch_exceptions=False)


@pytest.mark.parametrize("command", [("sessions",), ("who",), ("find", "one")])
def test_an_unknown_source_is_refused_naming_the_known_ones(command: tuple[str, ...]) -> None:
    result = run(*command, "--source", "nosuch")
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.count("\n") == 1, result.stderr
    assert "--source: expected one of address, app, batch, cli, newKind" in result.stderr


def test_a_known_source_filters() -> None:
    listed = json.loads(run("sessions", "--source", "cli", "--json").stdout)
    assert [s["address"] for s in listed["sessions"]] == ["kx:one"]
    # a kind only a session has (its harness did not declare it) is known too
    assert [s["address"] for s in json.loads(run("sessions", "--source", "newKind", "--json").stdout)["sessions"]] == ["kx:two"]
    assert len(json.loads(run("sessions", "--source", "app", "--json").stdout)["sessions"]) == 2
    # declared, but no session of that kind now: an empty answer, not an error
    empty = run("sessions", "--source", "batch")
    assert empty.exit_code == 0 and "No sessions found." in empty.stdout
    assert run("find", "one", "--source", "cli").exit_code == 0
    assert run("who", "--source", "cli").exit_code == 0


def test_find_checks_the_source_before_an_exact_alias_answers() -> None:
    assert run("contacts", "add", "first", "kx:one").exit_code == 0
    assert run("find", "first", "--source", "cli").exit_code == 0
    refused = run("find", "first", "--source", "nosuch")
    assert refused.exit_code == 2 and "--source: expected one of" in refused.stderr
