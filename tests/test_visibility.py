"""The visibility rule every read goes through (:class:`agent_link_core.mailbox.Visibility`),
and ``agent-link show``, which reads one message through it. (A message's conversation is the
conversations plugin's: plugins/conversations.)"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from agent_link_testing.cli_identity import named_address_env
from click.testing import CliRunner

from agent_link_core.app import App
from agent_link_core.cli import build_cli
from agent_link_core.errors import AgentLinkError
from agent_link_core.mailbox import Visibility
from agent_link_core.model import Caller

ALICE = Caller("team:alice", "config", "team")
BOB = Caller("team:bob", "config", "team")


@pytest.fixture
def app(isolated_env: Path) -> Iterator[App]:
    a = App.create(dict(os.environ))
    yield a
    a.close()


def send(app: App, sender: Caller, to: str, body: str, **kw: Any) -> str:
    return str(asyncio.run(app.send(caller=sender, to=to, body=body, **kw)).message["id"])


def test_visible_to_is_one_rule_for_sql_and_rows(app: App) -> None:
    send(app, ALICE, "team:bob", "one")
    send(app, BOB, "team:carol", "two")
    rows = app.store.conn.execute("SELECT * FROM messages").fetchall()
    for vis in (app.mailbox.visible_to("team:alice"), app.mailbox.visible_to("team:carol"), app.mailbox.visible_to(None),
                app.mailbox.visible_to("not an address"), Visibility("user:me", True, "person")):
        where, params = vis.sql("messages")
        by_sql = {r[0] for r in app.store.conn.execute(f"SELECT id FROM messages WHERE {where}", params)}
        assert by_sql == {r["id"] for r in rows if vis.allows(r)}
    with pytest.raises(AgentLinkError) as caught:
        app.mailbox.visible_to("team:alice", all_mail=True)
    assert caught.value.code == "permission_denied" and caught.value.details["reason"] == "inspect_all_disabled"


def test_cli_show_one_message(app: App) -> None:
    root = send(app, ALICE, "team:bob", "ship the <release> today", anticipation="reply")
    runner = CliRunner()

    def invoke(args: list[str]) -> Any:  # as the address --from names (a script of that agent)
        return runner.invoke(build_cli(), args, env=named_address_env(args))

    one = invoke(["show", root, "--from", "team:bob", "--json"])
    shown = json.loads(one.output)["message"]
    assert shown["id"] == root and "bodyBytes" not in shown and "&lt;release&gt;" in shown["envelope"]
    assert "  ship the <release> today" in invoke(["show", root, "--from", "team:alice"]).output
    denied = invoke(["show", root, "--from", "team:carol"])
    assert denied.exit_code == 1 and f"Only the sender or the recipient may read message {root}." in denied.output
    assert invoke(["show", "01J0000000000000000000ZZZZ", "--from", "team:alice"]).exit_code == 1
