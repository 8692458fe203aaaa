"""The inbox read's budget rule is pinned (issue 32): whatever makes a read cheaper, every
read returns exactly what the rule of :mod:`agent_link_budgets.fit` (once ``agent_link_core/budget.py``) as first
written returned.

:func:`reference_inbox` is that first version, kept here word for word as the oracle (it
rendered every envelope again for each candidate message). Each case builds one mailbox,
copies it, reads one copy with :func:`agent_link_core.reading.inbox` fitted by this plugin and the other with the
oracle under a frozen clock, and compares the whole results (or the whole errors) and what
each read marked delivered in its copy. Cases vary the bodies (short, long, heavily escaped,
multi-byte, invisible characters, larger than the budget so they come in pages), budgets
(none, declared by a host with and without JSON indent, tiny, ``AGENT_LINK_READ_BYTES``),
message counts and limits, marking, open mail, mail held by a running wait, envelope
contributions of a plugin, and paging cursors (``messageId`` + ``offset``) followed to the end.
"""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path
from typing import Any

import pytest

from agent_link_budgets import fit
from agent_link_core import hookimpl
from agent_link_core.app import App
from agent_link_core.envelope import render_element, render_inbox
from agent_link_core.errors import AgentLinkError
from agent_link_core.harness import Harness, OutputBudget
from agent_link_core.records import OutgoingMessage
from agent_link_core.model import Caller, Session
from agent_link_core.records import EnvelopeContribution

FROZEN_MS = 1_780_000_000_000
SENDERS = [Caller(a, "explicit", a.split(":")[0]) for a in ("team:ann", "team:ben", "hb:cy")]


# -- the oracle: the budgeted read as first written (agent_link_core/budget.py then) ---------------

def _ref_fits(result: dict[str, Any], out: OutputBudget, messages: int) -> bool:
    shown = json.dumps({"ok": True, **result}, ensure_ascii=False, indent=out.json_indent)
    return len(shown.encode("utf-8")) + 400 + 48 * messages <= out.tool_result_bytes


def _ref_held(app: App, address: str) -> set[str]:
    senders = HOLDS[id(app)].senders
    if not senders:
        return set()
    return {row["id"] for row in app.mailbox.open_for(address, 500, undelivered_only=True) if row["from_addr"] in senders}


def reference_inbox(app: App, caller: Caller, out: OutputBudget | None, *, limit: int, mark: bool, include_open: bool,
                    message_id: str | None = None, offset: int = 0) -> dict[str, Any]:
    """The budgeted inbox read as first written (the oracle)."""
    app.require_caller(caller)
    if message_id is not None:
        row = app.mailbox.require(message_id)
        if row["recipient"] != caller.address:
            raise AgentLinkError("wrong_recipient", f"Message {row['id']} is not addressed to you.",
                                 {"messageId": row["id"], "expected": row["recipient"], "caller": caller.address})
        return _ref_page(app, caller, row, out, offset, mark)
    held = _ref_held(app, caller.address)
    rows = app.mailbox.drain(caller.address, limit + len(held), include_open=include_open)
    rows = [r for r in rows if r["id"] not in held][:limit]
    chosen: list[Any] = []
    for row in rows:
        trial = _ref_result(app, caller, [*chosen, row], [], None)
        if out is not None and not _ref_fits(trial, out, len(chosen) + 1):
            break
        chosen.append(row)
    if rows and not chosen:
        return _ref_page(app, caller, rows[0], out, 0, mark)
    marked = []
    if mark:
        for row in chosen:
            if row["delivered_at"] is None and app.mailbox.mark_delivered(row["id"], "inbox"):
                marked.append(row["id"])
    fresh = [app.mailbox.get_row(r["id"]) for r in chosen]
    return _ref_unshown(_ref_result(app, caller, fresh, marked, None), sum(1 for r in fresh if r["delivered_at"] is None))


def _ref_unshown(result: dict[str, Any], shown_unread: int) -> dict[str, Any]:
    """What a read shows whole and leaves unread no longer counts as remaining (a change after this oracle was written)."""
    page = result["page"]
    if not shown_unread or (page is not None and page["nextOffset"] is not None):
        return result
    left = max(result["remainingCount"] - shown_unread, 0)
    return {**result, "remainingCount": left, "more": f"{left} more message(s) wait: call read_agent_link_inbox again to read them." if left else None}


def _ref_result(app: App, caller: Caller, rows: list[Any], marked: list[str], page: dict[str, Any] | None,
                block: str | None = None) -> dict[str, Any]:
    views = []
    envelopes = []
    for row in rows:
        state = app.mailbox.state(row)
        view = app.mailbox.to_view(row, state)
        view["open"] = state.status in ("pending", "unresolved", "expired") if row["anticipation"] != "fyi" else row["delivered_at"] is None
        views.append(view)
        if block is None:
            envelopes.append(app.mailbox.envelope(row))
    held = _ref_held(app, caller.address) - {row["id"] for row in rows}
    remaining = max(app.mailbox.count_open(caller.address, undelivered_only=True) - len(held), 0)
    more = None
    if page is not None and page["nextOffset"] is not None:
        more = (f"This message continues: call read_agent_link_inbox with messageId {page['messageId']} and offset "
                f"{page['nextOffset']} to read the next part.")
    elif remaining:
        more = f"{remaining} more message(s) wait: call read_agent_link_inbox again to read them."
    return {
        "address": caller.address, "markedDelivered": marked, "messages": views,
        "openCount": sum(1 for v in views if v["open"]), "remainingCount": remaining, "heldByActiveWait": len(held),
        "renderedBlock": block if block is not None else render_inbox(envelopes), "more": more, "page": page,
    }


def _ref_page(app: App, caller: Caller, row: Any, out: OutputBudget | None, offset: int, mark: bool) -> dict[str, Any]:
    envelope = app.mailbox.envelope(row)
    total = len(envelope)
    if not 0 <= offset < total:
        raise AgentLinkError("invalid_arguments", f"offset {offset} is outside the message's {total} characters.",
                             {"errors": [{"path": "offset", "rule": "range", "expected": f"0-{total - 1}"}]})

    def build(end: int) -> dict[str, Any]:
        page = {"messageId": row["id"], "offset": offset, "nextOffset": end if end < total else None, "totalChars": total}
        return _ref_result(app, caller, [row], [], page, envelope[offset:end])

    end = total
    if out is not None and not _ref_fits(build(total), out, 1):
        low, high = offset + 1, total
        while low < high:
            mid = (low + high + 1) // 2
            if _ref_fits(build(mid), out, 1):
                low = mid
            else:
                high = mid - 1
        end = low
    marked = []
    if end == total and mark and row["delivered_at"] is None and app.mailbox.mark_delivered(row["id"], "inbox"):
        marked.append(row["id"])
    result = build(end)
    result["markedDelivered"] = marked
    if marked:
        result = {**_ref_result(app, caller, [app.mailbox.get_row(row["id"])], marked, result["page"], result["renderedBlock"])}
    return _ref_unshown(result, 0 if marked or row["delivered_at"] is not None else 1)


# -- the mailboxes --------------------------------------------------------------------------

class BudgetHost(Harness):
    """``hb:<id>``: a host declaring an output budget (set per case)."""

    name = "hb"
    output_budget: OutputBudget | None = OutputBudget(tool_result_bytes=6_000, json_indent=2)

    async def get_session(self, session_id: str) -> Session | None:
        return Session(f"hb:{session_id}", "hb", session_id)


class Holds:
    """Stands in for the waits plugin (plugins/waits): a running wait for mail from one of ``senders`` holds that mail."""

    def __init__(self) -> None:
        self.senders: set[str] = set()

    @hookimpl
    def agent_link_held_messages(self, address: str, rows: list[Any] | None, app: App) -> set[str] | None:
        if not self.senders:
            return None
        rows = app.mailbox.open_for(address, 500, undelivered_only=True) if rows is None else rows
        return {row["id"] for row in rows if row["from_addr"] in self.senders}


#: each App's Holds, by id(App)
HOLDS: dict[int, Holds] = {}


class Stamp:
    """Puts a ``<stamp>`` element in the envelope of messages whose metadata asks for one."""

    @hookimpl
    def agent_link_register_harnesses(self, register: Any) -> None:
        register(BudgetHost())

    @hookimpl
    def agent_link_render_envelopes(self, messages: tuple[dict[str, Any], ...]) -> dict[str, EnvelopeContribution]:
        return {m["id"]: EnvelopeContribution(elements=[render_element("stamp", [("n", str(stamp))], "stamped " * 3)])
                for m in messages if (stamp := m["metadata"].get("stamp"))}


BODIES = {
    "short": lambda rng, i: f"note {i}",
    "medium": lambda rng, i: f"report {i}: " + "lorem ipsum " * rng.randint(20, 120),
    "escaped": lambda rng, i: "<&>" * rng.randint(50, 900) + f" #{i}",
    "multibyte": lambda rng, i: "é漢😀 " * rng.randint(30, 700),
    "invisible": lambda rng, i: ("a\u200b\u200b\u200b" * 20 + "\x01" * 30 + "b") * rng.randint(1, 8),
    "large": lambda rng, i: "".join(f"line {n} of a long text\n" for n in range(rng.randint(200, 900))),
    "huge": lambda rng, i: "<" * 60_000,
}


def build_mailbox(state: Path, rng: random.Random, me: str, count: int, kinds: list[str],
                  monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Store ``count`` messages for ``me`` (and a few for someone else) in ``state``; deliver,
    resolve and stamp some. Returns the ids addressed to ``me``, oldest first."""
    monkeypatch.setenv("AGENT_LINK_STATE_DIR", str(state))
    app = App.create(extra_plugins=(Stamp(),))
    ids = []
    try:
        for i in range(count + 2):
            sender = SENDERS[rng.randrange(len(SENDERS))]
            to = me if i < count else "team:else"
            mid = f"01J{i:023d}"
            meta = {"stamp": i} if rng.random() < 0.3 else {}
            anticipation = rng.choice(["fyi", "reply", "action"])
            body = BODIES[rng.choice(kinds)](rng, i)
            app.mailbox.store_message(OutgoingMessage(mid, sender, to, to, body, anticipation, None, None, metadata=meta))
            if to == me:
                ids.append(mid)
                roll = rng.random()
                if roll < 0.2:
                    app.mailbox.mark_delivered(mid, "test")
                elif roll < 0.27 and anticipation != "fyi":
                    app.mailbox.mark_delivered(mid, "test")
                    app.mailbox.resolve(mid, Caller(me, "explicit", me.split(":")[0]), "done")
    finally:
        app.close()
    return ids


def build_case(state: Path, rng: random.Random, me: str, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The mailbox of one case: how many messages, which kinds of bodies (``huge`` only with
    few messages), drawn from ``rng``."""
    count = rng.choice([0, 1, 2, 3, 5, 8, 13, 21, 30])
    kinds = rng.sample(sorted(BODIES), rng.randint(1, 3))
    if "huge" in kinds and count > 8:
        kinds = [k for k in kinds if k != "huge"] or ["short"]
    return build_mailbox(state, rng, me, count, kinds, monkeypatch)


def open_copy(state: Path, copy: Path, read_bytes: int | None, host_budget: OutputBudget | None,
              monkeypatch: pytest.MonkeyPatch) -> App:
    copy.mkdir(parents=True, exist_ok=True)
    for path in state.glob("agent-link.db*"):
        shutil.copy(path, copy / path.name)
    monkeypatch.setenv("AGENT_LINK_STATE_DIR", str(copy))
    if read_bytes is None:
        monkeypatch.delenv("AGENT_LINK_READ_BYTES", raising=False)
    else:
        monkeypatch.setenv("AGENT_LINK_READ_BYTES", str(read_bytes))
    monkeypatch.setattr(BudgetHost, "output_budget", host_budget)
    return open_app()


def open_app() -> App:
    """An App with :class:`Stamp` and its own :class:`Holds` (``HOLDS``)."""
    holds = Holds()
    app = App.create(extra_plugins=(Stamp(), holds))
    HOLDS[id(app)] = holds
    return app


def outcome(fn: Any, app: App, caller: Caller, out: OutputBudget | None, **kwargs: Any) -> Any:
    try:
        return ("ok", fn(app, caller, out, **kwargs))
    except AgentLinkError as exc:
        return ("error", exc.to_dict())


def delivered(app: App) -> list[tuple[Any, ...]]:
    return [tuple(r) for r in app.store.conn.execute(
        "SELECT id, delivered_at, first_delivered_at, delivered_via, open FROM messages ORDER BY id")]


BUDGETS: list[OutputBudget | None] = [
    None, OutputBudget(4_000, 2), OutputBudget(10_000, 2), OutputBudget(45_000, None), OutputBudget(1_500, None),
    OutputBudget(2_600, 4), OutputBudget(20_000, 0), OutputBudget(900, 2),
]
CASES = list(range(72))


@pytest.fixture(autouse=True)
def frozen_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("agent_link_core.mailbox.now_ms", lambda: FROZEN_MS)


@pytest.mark.parametrize("case", CASES)
def test_a_read_returns_what_the_first_budget_rule_returned(case: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, read: Any) -> None:
    rng, me, host = random.Random(case), ("hb:me" if case % 3 == 0 else "team:me"), case % 3 == 0
    ids = build_case(tmp_path / "built", rng, me, monkeypatch)
    read_bytes = rng.choice([None, 2_000, 5_000, 40_000, 120_000])
    host_budget = rng.choice(BUDGETS[1:] + [None])
    caller = Caller(me, "explicit", "hb" if host else "team")
    apps = [open_copy(tmp_path / "built", tmp_path / name, read_bytes, host_budget, monkeypatch) for name in ("new", "ref")]
    try:
        if rng.random() < 0.3 and ids:
            for app in apps:  # a running wait holds mail from one sender
                HOLDS[id(app)].senders.add(SENDERS[case % 3].address)
        # the host's own budget (or AGENT_LINK_READ_BYTES without one), else one given
        out = fit.caller_budget(apps[0], caller) if rng.random() < 0.5 else rng.choice(BUDGETS)
        reads: list[dict[str, Any]] = []
        for step in range(6):  # follow `more` and page cursors, as a reader would
            kwargs: dict[str, Any] = {"limit": rng.choice([1, 3, 20, 100]), "mark": rng.random() < 0.6,
                                      "include_open": rng.random() < 0.7}
            last = reads[-1] if reads else None
            if last and last[1].get("page") and last[1]["page"]["nextOffset"] is not None:
                kwargs.update(message_id=last[1]["page"]["messageId"], offset=last[1]["page"]["nextOffset"])
            elif ids and rng.random() < 0.25:
                target = rng.choice(ids)
                size = len(apps[0].mailbox.envelope(apps[0].mailbox.get_row(target)))
                kwargs.update(message_id=target.lower() if rng.random() < 0.2 else target,
                              offset=rng.choice([0, size // 2, size - 1, size, -1]))
            new = outcome(read, apps[0], caller, out, **kwargs)
            ref = outcome(reference_inbox, apps[1], caller, out, **kwargs)
            assert new == ref, (step, kwargs)
            assert delivered(apps[0]) == delivered(apps[1]), (step, kwargs)
            reads.append(new)
        if ids:  # another session asking for my message by id
            other = Caller("team:else", "explicit", "team")
            assert outcome(read, apps[0], other, out, limit=20, mark=True, include_open=True, message_id=ids[0]) == \
                outcome(reference_inbox, apps[1], other, out, limit=20, mark=True, include_open=True, message_id=ids[0])
    finally:
        for app in apps:
            app.close()


def test_the_cases_reach_every_kind_of_answer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The pinned cases are not all alike: the oracle's answers over them include cut reads,
    pages, whole reads and errors (checked on a sample built the same way)."""
    seen: set[str] = set()
    for case in range(0, 72, 6):
        rng, me, host = random.Random(case), ("hb:me" if case % 3 == 0 else "team:me"), case % 3 == 0
        build_case(tmp_path / f"c{case}", rng, me, monkeypatch)
        app = open_app()
        try:
            caller = Caller(me, "explicit", "hb" if host else "team")
            for out in BUDGETS:
                result = reference_inbox(app, caller, out, limit=20, mark=False, include_open=True)
                if result["page"] is not None:
                    seen.add("page")
                elif result["more"]:
                    seen.add("cut")
                elif result["messages"]:
                    seen.add("whole")
        finally:
            app.close()
    assert seen == {"page", "cut", "whole"}
