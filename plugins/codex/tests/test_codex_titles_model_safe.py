"""Titles as a person would call them, and no raw invisible characters for the model (issue 29,
items 5 and 6), through a real MCP client session and the CLI, on Codex transcripts.

* Codex names a thread after its first user message, which for a thread agent-link started is
  the envelope: ``list_agents`` shows the sender and the body's first words, and keeps the
  host's title as ``rawTitle``;
* a title holding U+202E, U+200B, U+200D or U+FEFF reaches the model with each shown as a
  visible ``\\u{XXXX}`` escape, in every tool result (here ``list_agents``, ``resolve_agent``,
  ``list_codex_threads``), as the CLI shows it.
"""

from __future__ import annotations

import json
import time
import unicodedata
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from agent_link_core.cli import build_cli
from agent_link_core.envelope import EnvelopeMessage, render_envelope
from agent_link_testing.mcp_client import agent_link_mcp

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]
STARTED = "01a22a93-0000-7000-8000-0000000000a1"
TRICKY = "01a22a93-0000-7000-8000-0000000000a2"
SENDER = "claude:11111111-2222-4333-8444-555555555555"
BASE = {"AGENT_LINK_CODEX_AUTOSTART": "0", "AGENT_LINK_DISABLE_PLUGINS": "claude roles receipts", "AGENT_LINK_ADDRESS": "test:me"}
INVISIBLE = "\u202e\u200b\u200d\ufeff"


def strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield k
            yield from strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from strings(v)


def raw_invisibles(value: Any) -> set[str]:
    return {f"U+{ord(c):04X}" for s in strings(value) for c in s if c not in "\n\t" and unicodedata.category(c)[0] == "C"}


@pytest.fixture
def threads(isolated_env: Path, make_rollout: Callable[..., Path]) -> None:
    envelope = render_envelope(EnvelopeMessage("01ARZ3NDEKTSV4RRFFQ69G5FAV", SENDER, True, f"codex:{STARTED}", int(time.time() * 1000),
                                               "action", "Approve and merge PR 42 once the build is green, then tell me"))
    home = isolated_env.parent / ".codex"
    make_rollout(home, STARTED, cwd="/work/alpha", messages=[("user", envelope, None)])
    make_rollout(home, TRICKY, cwd="/work/beta", messages=[("user", "hi", None)], name=f"deploy{INVISIBLE}staging")


async def test_titles_read_as_a_person_would_say_them_and_carry_nothing_invisible(threads: None) -> None:
    async with agent_link_mcp(BASE) as me:
        listed = await me.call("list_agents", {})
        resolved = await me.call("resolve_agent", {"query": "deploy"})
        threads_listed = await me.call("list_codex_threads", {})
    by_id = {s["id"]: s for s in listed["sessions"]}
    started = by_id[STARTED]
    assert started["title"] == f"{SENDER}: Approve and merge PR 42 once the build …"
    assert started["rawTitle"].startswith('<agent-link-message id="01ARZ3NDEKTSV4RRFFQ69G5FAV"')
    assert by_id[TRICKY]["title"] == "deploy\\u{202E}\\u{200B}\\u{200D}\\u{FEFF}staging"
    assert resolved["best"]["title"] == by_id[TRICKY]["title"]
    for result in (listed, resolved, threads_listed):
        assert result["ok"] is True and raw_invisibles(result) == set(), result
    assert any("\\u{202E}" in s for s in strings(threads_listed))


def test_the_cli_shows_the_same_titles(threads: None, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in BASE.items():
        monkeypatch.setenv(name, value)
    done = CliRunner().invoke(build_cli(), ["sessions", "--json"], catch_exceptions=False)
    assert done.exit_code == 0, done.output
    data = json.loads(done.stdout)
    titles = {s["id"]: s["title"] for s in data["sessions"]}
    assert titles[STARTED] == f"{SENDER}: Approve and merge PR 42 once the build …"
    table = CliRunner().invoke(build_cli(), ["sessions"], catch_exceptions=False).stdout
    assert f"{SENDER}: Approve" in table and "agent-link-message" not in table and not raw_invisibles(table.replace("\n", ""))
