"""The lease tools through real MCP client sessions (two ``agent-link mcp`` processes), and the
``lease``/``release``/``leases`` commands through the CLI."""

from __future__ import annotations

import json
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from agent_link_core.cli import build_cli
from agent_link_testing.mcp_client import agent_link_mcp


def env(address: str) -> dict[str, str]:
    return {"AGENT_LINK_ADDRESS": address, "AGENT_LINK_LOAD_PLUGINS": "presence leases"}


@pytest.mark.anyio
async def test_leases_over_mcp(isolated_env: Path, repo: str) -> None:
    async with AsyncExitStack() as stack:
        alice = await stack.enter_async_context(agent_link_mcp(env("test:alice")))
        bob = await stack.enter_async_context(agent_link_mcp(env("test:bob")))
        tools = await alice.tools()
        assert {"lease_paths", "release_paths", "list_leases"} <= set(tools)
        assert tools["list_leases"].annotations.read_only_hint is True
        assert tools["lease_paths"].input_schema["properties"]["exclusive"]["default"] is True

        got = await alice.call("lease_paths", {"paths": ["src"], "reason": "moving modules", "ttlMs": 60_000, "projectRoot": repo})
        assert got["ok"] and got["leases"][0]["path"] == "src" and got["leases"][0]["expiresInMs"] <= 60_000

        refused = await bob.call("lease_paths", {"paths": ["src/a.py", "docs"], "projectRoot": repo})
        assert refused["ok"] is False and refused["error"]["code"] == "lease_conflict"
        [conflict] = refused["error"]["details"]["conflicts"]
        assert {k: conflict[k] for k in ("holder", "paths", "exclusive", "reason", "expiresAt")} == {
            "holder": "test:alice", "paths": ["src"], "exclusive": True, "reason": "moving modules",
            "expiresAt": got["leases"][0]["expiresAt"]}
        assert refused["error"]["hint"]
        bad = await bob.call("lease_paths", {"paths": ["/etc/passwd"], "projectRoot": repo})
        assert bad["error"]["code"] == "invalid_arguments" and bad["error"]["details"]["errors"][0]["rule"] == "outside_root"

        listed = await bob.call("list_leases", {"path": "src/a.py", "projectRoot": repo})
        assert [(x["holder"], x["path"]) for x in listed["leases"]] == [("test:alice", "src")]

        not_held = await bob.call("release_paths", {"paths": ["src"], "projectRoot": repo})
        assert not_held["released"] == [] and not_held["warnings"][0]["code"] == "not_held"
        released = await alice.call("release_paths")
        assert [x["path"] for x in released["released"]] == ["src"]
        assert (await bob.call("lease_paths", {"paths": ["src/a.py"], "projectRoot": repo}))["ok"]
        health = await alice.call("agent_link_health")
        assert health["sections"]["leases"]["active"] == 1


def cli(*args: str) -> Any:
    return CliRunner().invoke(build_cli(), list(args))


def test_lease_commands(isolated_env: Path, repo: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENT_LINK_LOAD_PLUGINS", "presence leases")
    monkeypatch.chdir(repo)
    monkeypatch.setenv("AGENT_LINK_ADDRESS", "test:alice")
    got = cli("lease", "src", "--reason", "refactor", "--json")
    assert got.exit_code == 0, got.output
    assert json.loads(got.output)["leases"][0]["path"] == "src"
    assert "src" in cli("leases").output and "refactor" in cli("leases").output

    monkeypatch.setenv("AGENT_LINK_ADDRESS", "test:bob")
    refused = cli("lease", "src/**/*.py")
    assert refused.exit_code == 1
    assert "held by test:alice: src exclusive" in refused.output and "(refactor)" in refused.output
    outside = cli("lease", "../elsewhere")
    assert outside.exit_code == 2 and "outside the project root" in outside.output and "Traceback" not in outside.output
    several = cli("lease", "../elsewhere", "", "src/[a")
    assert several.exit_code == 2 and "Traceback" not in several.output
    assert "Bad paths: '../elsewhere' is outside the project root" in several.output and "An empty pattern" in several.output
    assert "expected every '[' closed by ']'" in several.output
    # the commands' own names, never the tools' (PATH #n, --project-root)
    assert "PATH #1: expected a path inside the project root" in several.output and "PATH #3: expected every '['" in several.output
    assert "paths" not in several.output.replace("Bad paths", "")
    missing = cli("lease", "src", "--project-root", str(Path(repo) / "missing"))
    assert missing.exit_code == 2 and "--project-root '" in missing.output and "Expected --project-root:" in missing.output
    assert "projectRoot" not in missing.output
    for command in (("leases", "--holder", "not an address"), ("release", "--all", "--holder", "nobody")):
        bad = cli(*command)
        assert bad.exit_code == 2 and "is not an address" in bad.output and "Traceback" not in bad.output
    assert cli("release").exit_code == 2  # paths or --all
    monkeypatch.delenv("AGENT_LINK_ADDRESS")
    anonymous = cli("release", "--all")  # no session and no AGENT_LINK_ADDRESS: said without a word of mailboxes
    assert anonymous.exit_code == 1 and "no address to act as (for mail, leases or roles)" in anonymous.output
    assert "mailbox" not in anonymous.output
    assert json.loads(cli("leases", "--json", "--holder", "test:bob").output)["leases"] == []

    monkeypatch.setenv("AGENT_LINK_ADDRESS", "test:alice")
    assert "released src" in cli("release", "src/").output
    assert "No active leases." in cli("leases").output


def test_a_person_releases_a_stale_lease(isolated_env: Path, repo: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENT_LINK_LOAD_PLUGINS", "presence leases")
    monkeypatch.chdir(repo)
    monkeypatch.setenv("AGENT_LINK_ADDRESS", "codex:gone")
    assert cli("lease", "src", "docs").exit_code == 0
    monkeypatch.setenv("AGENT_LINK_ADDRESS", "test:alice")
    refused = cli("release", "--holder", "codex:gone", "--all")
    assert refused.exit_code == 1 and "AGENT_LINK_LEASE_ADMIN=1" in refused.output and "Traceback" not in refused.output
    monkeypatch.setenv("AGENT_LINK_LEASE_ADMIN", "1")
    assert "released src" in cli("release", "--holder", "codex:gone", "src").output
    assert [x["path"] for x in json.loads(cli("leases", "--json").output)["leases"]] == ["docs"]
    monkeypatch.delenv("AGENT_LINK_ADDRESS")  # a person's shell: no address needed with --holder
    assert "released docs" in cli("release", "--holder", "codex:gone", "--all").output
    assert "No active leases." in cli("leases").output


def test_a_workers_lease_shows_the_task_that_ends_it(isolated_env: Path, repo: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from agent_link_core.app import App
    from agent_link_core.store import now_ms
    from agent_link_leases.table import Project, claim

    monkeypatch.setenv("AGENT_LINK_LOAD_PLUGINS", "presence leases")
    app = App.create()
    try:
        claim(app.store, "codex:worker", Project(repo, False), ["src"], exclusive=True, reason="task", ttl_ms=600_000, now=now_ms(),
              until_resolved="01JZ0000000000000000000001")
    finally:
        app.close()
    shown = cli("leases").output
    assert "codex:worker" in shown and "or message 01JZ0000000000000000000001 is resolved  (task)" in shown


def test_errors_name_the_commands_options(isolated_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENT_LINK_LOAD_PLUGINS", "presence leases")
    monkeypatch.setenv("AGENT_LINK_ADDRESS", "team:alice")
    nowhere = tmp_path / "nogit"
    nowhere.mkdir()
    monkeypatch.chdir(nowhere)
    for command in (("lease", "a.txt"), ("release", "a.txt"), ("leases", "--path", "a.txt")):
        got = cli(*command)
        # said once: the message names the option to pass, so no list says it again
        assert got.exit_code == 2 and "pass --project-root." in got.output and got.output.count("--project-root") == 1, got.output
        assert "projectRoot" not in got.output and "Traceback" not in got.output
    for command in (("lease", ""), ("release", " ")):  # what is wrong first: the empty path, not the root
        got = cli(*command)
        assert got.exit_code == 2 and "an empty path names nothing" in got.output and "--project-root" not in got.output, got.output


def test_releasing_anothers_lease_says_who_holds_it(isolated_env: Path, repo: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENT_LINK_LOAD_PLUGINS", "presence leases")
    monkeypatch.chdir(repo)
    monkeypatch.setenv("AGENT_LINK_ADDRESS", "team:alice")
    assert cli("lease", "a.txt").exit_code == 0
    monkeypatch.setenv("AGENT_LINK_ADDRESS", "team:bob")
    got = cli("release", "a.txt", "b.txt")
    assert got.exit_code == 1
    assert "held by team:alice, not by you: a.txt" in got.output and "not released" in got.output
    assert "not held: b.txt" in got.output and "not held: a.txt" not in got.output
    data = json.loads(cli("release", "a.txt", "--json").output)
    assert data["notHeld"] == ["a.txt"] and [o["holder"] for o in data["heldByOthers"]] == ["team:alice"]
    assert [x["holder"] for x in json.loads(cli("leases", "--json").output)["leases"]] == ["team:alice"]  # still held
    nobody = cli("release", "b.txt")
    assert nobody.exit_code == 0 and "not held: b.txt" in nobody.output


def test_size_limits_and_a_lease_of_the_whole_project(isolated_env: Path, repo: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENT_LINK_LOAD_PLUGINS", "presence leases")
    monkeypatch.chdir(repo)
    monkeypatch.setenv("AGENT_LINK_ADDRESS", "team:alice")
    for typed, said in (("a" * 5000, "is 5000 bytes long; a path is at most 4096 bytes"),
                        ("src/" + "n" * 256, "has a name of 256 bytes; a file or directory name is at most 255 bytes")):
        got = cli("lease", typed)
        assert got.exit_code == 2 and said in got.output and "PATH #1: expected" in got.output
        assert len(got.output.strip().splitlines()) == 1 and "a" * 100 not in got.output
    long_reason = cli("lease", "src", "--reason", "r" * 100_000)
    assert long_reason.exit_code == 2 and len(long_reason.output.strip().splitlines()) == 1
    assert "--reason: expected at most 1000 characters" in long_reason.output and "r" * 1001 not in long_reason.output
    assert cli("leases").output.strip() == "No active leases."

    whole = cli("lease", ".")
    assert whole.exit_code == 0 and whole.output.startswith(".")
    assert "warning: Your lease of . covers the whole project" in whole.output
    data = json.loads(cli("lease", ".", "--json").output)
    assert [w["code"] for w in data["warnings"]] == ["lease_covers_project"]
    assert "warning" not in cli("lease", "src/a.py").output


EVIL = "editing\x1b[2J\a\u202eevil\nsecond line"


def test_another_agents_reason_reaches_the_terminal_escaped(isolated_env: Path, repo: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENT_LINK_LOAD_PLUGINS", "presence leases")
    monkeypatch.chdir(repo)
    monkeypatch.setenv("AGENT_LINK_ADDRESS", "team:dave")
    assert cli("lease", "c.txt", "--reason", EVIL).exit_code == 0
    monkeypatch.setenv("AGENT_LINK_ADDRESS", "team:erin")
    listed = cli("leases")
    refused = cli("lease", "c.txt")
    assert refused.exit_code == 1
    for shown in (listed.output, refused.stderr):
        assert "editing\\u{001B}[2J\\u{0007}\\u{202E}evil\\u{000A}second line" in shown, shown
        assert not any(c in shown for c in "\x1b\a\u202e"), shown
    assert len(listed.output.strip().splitlines()) == 1  # the reason cannot forge a line of the table


def test_a_refused_claim_says_what_to_send(isolated_env: Path, repo: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENT_LINK_LOAD_PLUGINS", "presence leases")
    monkeypatch.chdir(repo)
    monkeypatch.setenv("AGENT_LINK_ADDRESS", "team:dave")
    assert cli("lease", "c.txt", "--reason", "tidying").exit_code == 0
    monkeypatch.setenv("AGENT_LINK_ADDRESS", "team:erin")
    as_json = cli("lease", "c.txt", "--json")
    assert as_json.exit_code == 1
    data = json.loads(as_json.stdout)
    assert data["version"] and data["ok"] is False and data["error"]["code"] == "lease_conflict"
    [conflict] = data["error"]["details"]["conflicts"]
    assert conflict["holder"] == "team:dave" and conflict["paths"] == ["c.txt"] and conflict["reason"] == "tidying"
    assert conflict["message"].startswith("team:erin needs c.txt under ")
    assert "error.details.conflicts[].message" in as_json.stderr and "Traceback" not in as_json.output

    human = cli("lease", "c.txt")
    assert human.exit_code == 1 and human.stdout == ""
    assert "held by team:dave: c.txt exclusive until" in human.stderr and "(tidying)" in human.stderr
    # the message to send, as a command a person can run
    assert f"  ask: agent-link send team:dave 'team:erin needs c.txt under {repo}," in human.stderr
    assert "Send each holder the message above" in human.stderr and "conflicts[]" not in human.stderr
