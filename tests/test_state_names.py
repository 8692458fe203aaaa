"""One name per delivery state: what the code emits is listed in docs/delivery-states.md, and a
synonym of a listed state (a new ``queued-...`` spelling, say) fails here."""

from __future__ import annotations

import ast
import io
import re
import subprocess
import tokenize
from pathlib import Path

import pytest

from agent_link_core.app import App
from agent_link_core.model import Caller

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "delivery-states.md"
# Spellings that look like a delivery state: anything queued, and "mailbox only" in any form.
STATE_LIKE = re.compile(r"^(queued[A-Za-z_-]*|[A-Za-z_-]*[-_]queued|mailbox[-_]only)$", re.IGNORECASE)
RETIRED = ("queued_in_mailbox", "queued-mailbox", "mailbox_only")


def documented() -> dict[str, list[str]]:
    """``{section heading: [names in its tables' first column]}``."""
    sections: dict[str, list[str]] = {}
    heading = ""
    for line in DOC.read_text(encoding="utf-8").splitlines():
        if line.startswith("## "):
            heading = line[3:].strip()
        m = re.match(r"^\| `([^`]+)` \|", line)
        if m and heading:
            sections.setdefault(heading, []).append(m.group(1))
    return sections


def all_documented() -> set[str]:
    return {name for names in documented().values() for name in names}


def sources() -> list[Path]:
    out = subprocess.run(["git", "ls-files", "*.py", "*.js", "*.html", "*.md"], cwd=REPO, capture_output=True,
                         text=True, check=True).stdout.split()
    # the list itself names the retired spellings in its prose
    return [REPO / f for f in out if "/tests/" not in f and not f.startswith("tests/") and (REPO / f).is_file() and REPO / f != DOC]


def state_like_literals(path: Path) -> set[str]:
    """Whole string literals (Python) or code spans and quoted words (other files) that look
    like a delivery state."""
    text = path.read_text(encoding="utf-8", errors="replace")
    found: set[str] = set()
    if path.suffix == ".py":
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.STRING:
                try:
                    value = ast.literal_eval(tok.string)
                except (ValueError, SyntaxError):
                    continue
                if isinstance(value, str) and STATE_LIKE.match(value):
                    found.add(value)
    else:
        found.update(w for w in re.findall(r"[`'\"]([A-Za-z_-]+)[`'\"]", text) if STATE_LIKE.match(w))
    return found


def delivery_state_constants(path: Path) -> set[str]:
    """``Delivery(state="...")`` constants (either branch of a conditional included)."""
    if path.suffix != ".py":
        return set()
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == "Delivery":
            for kw in node.keywords:
                if kw.arg == "state":
                    values = [kw.value.body, kw.value.orelse] if isinstance(kw.value, ast.IfExp) else [kw.value]
                    found.update(v.value for v in values if isinstance(v, ast.Constant) and isinstance(v.value, str))
    return found


def test_the_documented_list_has_one_name_per_state() -> None:
    sections = documented()
    assert {"The message's delivery (`delivery`)", "What the push did (`deliveryState`)"} <= set(sections)
    for heading, listed in sections.items():
        assert len(listed) == len(set(listed)), f"a name is listed twice under {heading}"
    names = sorted({n for ns in sections.values() for n in ns})
    assert not set(RETIRED) & set(names)
    # one queued-state without qualifier: "queued"; the others say where it waits
    assert [n for n in names if n.replace("-", "_").startswith("queued") and n != "queued"] == [
        "queued-channel", "queued-offline", "queued-online"]


def test_every_state_like_name_in_the_code_is_documented() -> None:
    allowed = all_documented()
    stray = sorted(f"{path.relative_to(REPO)}: {name}" for path in sources() for name in state_like_literals(path)
                   if name not in allowed)
    assert not stray, "delivery-state names not in docs/delivery-states.md (one name per state):\n" + "\n".join(stray)


def test_every_push_outcome_a_harness_returns_is_documented() -> None:
    push = set(documented()["What the push did (`deliveryState`)"])
    emitted = {name for path in sources() for name in delivery_state_constants(path)}
    assert "queued" in emitted and emitted - push == set(), sorted(emitted - push)
    claude = REPO / "plugins" / "claude" / "agent_link_claude" / "harness.py"
    declared = re.search(r"DELIVERY_STATES = \(([^)]*)\)", claude.read_text(encoding="utf-8"))
    assert declared is not None
    assert set(re.findall(r'"([^"]+)"', declared.group(1))) <= push


def test_the_scan_catches_a_new_synonym(tmp_path: Path) -> None:
    """The check above can fail: a module emitting a new spelling is caught."""
    bogus = tmp_path / "bogus.py"
    bogus.write_text('RESULT = {"delivery": "queued_for_later", "state": Delivery(state="mailbox_only")}\n')
    assert state_like_literals(bogus) == {"queued_for_later", "mailbox_only"}
    assert delivery_state_constants(bogus) == {"mailbox_only"}
    assert not {"queued_for_later", "mailbox_only"} & all_documented()


@pytest.mark.anyio
async def test_what_the_tools_say_while_a_message_waits() -> None:
    """message_agent, status and reply with no host to push to: every value is a listed one."""
    delivery_names = set(documented()["The message's delivery (`delivery`)"])
    push_names = set(documented()["What the push did (`deliveryState`)"])
    app = App.create()
    try:
        alice, bob = Caller("team:alice", "config", "team"), Caller("team:bob", "config", "team")
        sent = await app.send(caller=alice, to="team:bob", body="ping", anticipation="reply")
        from agent_link_core.sending import message_summary

        summary = message_summary(app, sent)
        assert summary["delivery"] == "queued" and summary["deliveryState"] == "queued"
        status = app.mailbox.to_view(app.mailbox.stored(summary["messageId"]))
        assert status["delivery"] == "queued"
        replied = await app.reply(caller=bob, message_id=summary["messageId"], message="pong")
        assert replied["delivery"] == "queued"
        again = await app.send(caller=bob, to="team:alice", body="please confirm", anticipation="action")
        done = await app.reply(caller=alice, message_id=again.message["id"], resolution="done")
        assert done["delivery"] == "none"
        for value in (summary["delivery"], status["delivery"], replied["delivery"], done["delivery"]):
            assert value in delivery_names
        assert summary["deliveryState"] in push_names
    finally:
        app.close()
