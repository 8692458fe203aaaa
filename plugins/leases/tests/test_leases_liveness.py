"""A lease ends when its holder's session ends: a clashing claim finds the holder gone (its
harness says the session is archived, or not running and quiet for a while, or a plain address is served no more),
ends all the holder's leases and goes through; a holder that cannot be told gone keeps them."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from agent_link_core import hookimpl
from agent_link_core.app import App
from agent_link_core.errors import AgentLinkError
from agent_link_core.harness import Harness
from agent_link_core.model import Caller, Session
from agent_link_presence import RECENT_MS
from agent_link_core.store import now_ms
from agent_link_leases.liveness import gone_holders
from agent_link_leases.table import Project, active, claim
from agent_link_testing.plugin_suites import call_tool


async def claim_through_hook(app: App, holder: str, paths: list[str], project_root: str, reason: str | None = None,
                             until_resolved: str | None = None, key: str | None = None) -> Any:
    """``agent_link_claim_paths`` as the projects and roles plugins call it."""
    return await app.hooks.acall("agent_link_claim_paths", holder=holder, paths=paths, project_root=project_root, reason=reason,
                                 ttl_ms=None, until_resolved=until_resolved, key=key)

pytestmark = pytest.mark.anyio

BOB = Caller("test:bob", "config", "test")


class Hosts(Harness):
    """Sessions ``live``, ``gone`` (not running, quiet for an hour), ``stopping`` (not
    running, active a minute ago), ``old`` (archived); ``broken`` raises, ``slow`` never
    answers, any other id is unknown."""

    name = "host"

    async def get_session(self, session_id: str) -> Session | None:
        if session_id == "broken":
            raise RuntimeError("the host is down")
        if session_id == "slow":
            await asyncio.sleep(3600)
        states = {"live": (True, False, 0), "gone": (False, False, 3_600_000), "stopping": (False, False, 60_000),
                  "old": (None, True, 0)}
        if session_id not in states:
            return None
        loaded, archived, quiet_ms = states[session_id]
        return Session(f"host:{session_id}", "host", session_id, loaded=loaded, archived=archived,
                       last_activity_ms=now_ms() - quiet_ms)


class Plugin:
    @hookimpl
    def agent_link_register_harnesses(self, register: Any) -> None:
        register(Hosts())


@pytest.fixture
def app(isolated_env: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[App]:
    monkeypatch.setenv("AGENT_LINK_DISABLE_PLUGINS", "codex claude")
    application = App.create(extra_plugins=(("host", Plugin()),))
    yield application
    application.close()


def serve(app: App, address: str, pid: int | None, age_ms: int) -> None:
    at = now_ms() - age_ms
    with app.store.write() as conn:
        conn.execute("INSERT INTO presence (address, first_seen, last_seen, pid, source) VALUES (?, ?, ?, ?, ?)",
                     (address, at, at, pid, "mcp" if pid else "inbox"))


def dead_pid() -> int:
    done = subprocess.Popen([sys.executable, "-c", "pass"])
    done.wait()
    return done.pid


async def test_who_counts_as_gone(app: App, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("agent_link_leases.liveness.CHECK_TIMEOUT_S", 0.2)
    serve(app, "team:served", os.getpid(), RECENT_MS * 2)  # a running server, however old its record
    serve(app, "team:recent", None, 1000)  # read a moment ago
    serve(app, "team:left", dead_pid(), RECENT_MS + 60_000)  # its server died, nobody read since
    holders = ["host:live", "host:gone", "host:stopping", "host:old", "host:unknown", "host:broken", "host:slow",
               "team:served", "team:recent", "team:left", "team:never-served"]
    assert await gone_holders(app, holders, now_ms()) == {
        "host:gone": "session_not_running", "host:old": "session_archived", "team:left": "presence_expired"}


async def test_a_clashing_claim_ends_a_gone_holders_leases(app: App, repo: str) -> None:
    root = Project(repo, False)
    claim(app.store, "host:gone", root, ["src/a.py", "docs"], exclusive=True, reason="old work", ttl_ms=600_000, now=now_ms())
    claim(app.store, "host:live", root, ["src/pkg"], exclusive=True, reason=None, ttl_ms=600_000, now=now_ms())
    refused = await call_tool(app, "lease_paths", {"paths": ["src/pkg"], "projectRoot": repo}, BOB)
    # the live holder still clashes: nothing is granted and nothing of the gone holder ends
    assert refused["error"]["code"] == "lease_conflict"
    assert [c["holder"] for c in refused["error"]["details"]["conflicts"]] == ["host:live"]
    assert {x["holder"] for x in active(app.store, now_ms())} == {"host:gone", "host:live"}

    got = await call_tool(app, "lease_paths", {"paths": ["src/a.py"], "projectRoot": repo}, BOB)
    assert got["ok"] and got["ended"] == [{"holder": "host:gone", "why": "session_not_running", "paths": ["src/a.py", "docs"]}]
    assert {x["holder"] for x in active(app.store, now_ms())} == {"host:live", "test:bob"}


async def test_a_holder_that_cannot_be_told_gone_keeps_its_leases(app: App, repo: str) -> None:
    claim(app.store, "host:broken", Project(repo, False), ["src"], exclusive=True, reason=None, ttl_ms=600_000, now=now_ms())
    refused = await call_tool(app, "lease_paths", {"paths": ["src"], "projectRoot": repo}, BOB)
    assert refused["error"]["code"] == "lease_conflict"


def test_the_cli_ends_a_gone_holders_leases(app: App, repo: str) -> None:
    from click.testing import CliRunner

    from agent_link_core.cli import build_cli

    serve(app, "team:left", dead_pid(), RECENT_MS + 60_000)
    claim(app.store, "team:left", Project(repo, False), ["src"], exclusive=True, reason=None, ttl_ms=600_000, now=now_ms())
    done = CliRunner().invoke(build_cli(), ["lease", "src/a.py", "--project-root", repo], env={"AGENT_LINK_ADDRESS": "test:bob"})
    assert done.exit_code == 0, done.output
    assert "ended team:left's leases (presence_expired): src" in done.output


async def test_a_workers_claim_ends_a_gone_holders_leases_and_clashes_with_a_live_one(app: App, repo: str) -> None:
    """``agent_link_claim_paths`` (a project worker's leasePaths, claimed under a stand-in
    holder before the launch): a gone holder's leases end, a holder that may still work clashes."""
    root = Project(repo, False)
    claim(app.store, "host:gone", root, ["src/a.py"], exclusive=True, reason="old work", ttl_ms=600_000, now=now_ms())
    got = await claim_through_hook(app, holder="a worker launching", paths=["src"], project_root=repo, reason="worker",
                                      until_resolved="M1", key="M1")
    assert got is not None and got["ended"] == [{"holder": "host:gone", "why": "session_not_running", "paths": ["src/a.py"]}]
    assert [(x["holder"], x["path"], x["reason"]) for x in active(app.store, now_ms())] == [("a worker launching", "src", "worker")]
    claim(app.store, "host:stopping", root, ["notes"], exclusive=True, reason=None, ttl_ms=600_000, now=now_ms())
    with pytest.raises(AgentLinkError) as clash:
        await claim_through_hook(app, holder="another launching", paths=["notes/x.md"], project_root=repo, key="M2")
    assert clash.value.code == "lease_conflict" and clash.value.details["conflicts"][0]["holder"] == "host:stopping"
