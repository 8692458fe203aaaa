"""The app surface promised to plugins (docs/plugins.md section 4) exists on the real App."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from agent_link_core.app import App

GUIDE = Path(__file__).resolve().parents[1] / "docs" / "plugins.md"


@pytest.fixture
def app() -> App:
    application = App.create()
    yield application
    application.close()


def promised() -> set[str]:
    """Every ``app.x`` / ``app.x.y`` the guide's section "The app surface" names."""
    text = GUIDE.read_text(encoding="utf-8")
    section = text[text.index("## 4. The app surface"):text.index("## 5.")]
    return set(re.findall(r"\bapp(?:\.[a-z_]+)+", section))


def test_every_promised_member_exists_on_the_app(app: App) -> None:
    names = promised()
    assert {"app.send", "app.mailbox.get_row", "app.store.write", "app.hooks.collect", "app.config.state_dir"} <= names
    for name in sorted(names):
        target: object = app
        for part in name.split(".")[1:]:
            assert hasattr(target, part), f"docs/plugins.md promises {name} to plugins, but the App has no {part} there"
            target = getattr(target, part)


def test_plugins_use_no_sql_on_the_core_tables() -> None:
    """Plugins own their tables; the core's are reached through the mailbox only."""
    import re

    core_tables = re.compile(r"\b(FROM|INTO|UPDATE|JOIN)\s+(messages|message_events|resolutions|reminders)\b",
                             re.IGNORECASE)
    # Known exceptions, each a debt of the mailbox's API, not a licence: the legacy importer
    # restores the original's history with its own ids and times (no mailbox write path keeps
    # them), and the machines relay reads the event's message and resolution raw, inside the
    # event's transaction (the mailbox's state escapes a reason the other machine escapes again).
    # The search index is an FTS5 external-content index over ``messages``: its triggers and the
    # join of a result page read the rows beside the index, by design of FTS5. The listings plugin
    # (who, find, contacts, watch) left the core with its SQL: the contacts the core resolves
    # aliases from, and watch's filtered stream of messages, still want a mailbox API. The loops
    # plugin's guard left the core with its SQL too: it counts the pair's recent messages with the
    # connection agent_link_before_store hands it, inside the store's write transaction. The
    # conversations plugin left the core with its SQL: walking a reply_to tree (recursive CTEs
    # over messages) still wants a mailbox API, and so does its filtered listing (agent_link_mailbox_inspect, which was
    # App.inspect). The presence plugin left the core with its SQL: its
    # suggestions read the contacts and the distinct senders of messages (one index seek each). The waits plugin left
    # the core with its SQL: a wait's oldest unread message from one agent still wants a mailbox API.
    # Queries one plugin alone asked of the mailbox moved into it (issue 31): the web panel's open
    # expectations and recent correspondents, a role handover's open mail, the Claude harness's
    # late-evidence candidates, the receipts repair's event scan and its visibility rule over receipts.
    allowed = {"plugins/presence/agent_link_presence/table.py", "plugins/waits/agent_link_waits/waits.py", "plugins/legacy/agent_link_legacy/engine.py", "plugins/machines/agent_link_machines/records.py",
               "plugins/search/agent_link_search/index.py", "plugins/search/agent_link_search/schema.py",
               "plugins/listings/agent_link_listings/listings.py", "plugins/listings/agent_link_listings/watch.py",
               "plugins/loops/agent_link_loops/plugin.py", "plugins/conversations/agent_link_conversations/conversation.py",
               "plugins/conversations/agent_link_conversations/inspect.py",
               "plugins/web/agent_link_web/views.py", "plugins/roles/agent_link_roles/handover.py",
               "plugins/claude/agent_link_claude/harness.py", "plugins/receipts/agent_link_receipts/recording.py",
               "plugins/receipts/agent_link_receipts/ledger.py"}
    root = Path(__file__).resolve().parents[1]
    offenders = [f"{path.relative_to(root)}:{n}" for folder in ("plugins", "examples")
                 for path in (root / folder).glob("*/agent_link_*/*.py") if str(path.relative_to(root)) not in allowed
                 for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if core_tables.search(line)]
    assert not offenders, offenders
