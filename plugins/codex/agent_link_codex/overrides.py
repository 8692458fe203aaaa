"""Turn overrides (``model``, ``effort``, ``cwd``) on existing Codex threads
(docs/behaviour.md §19 "Override policy").

An existing thread keeps its model, effort and cwd. ``message_agent`` /
``message_codex_thread`` may ask for a different value; :func:`check_send` (the codex plugin's
``agent_link_before_send``) decides before anything is stored:

* each requested value is compared with the thread's current one (the thread object the
  harness last saw: ``model``, ``reasoningEffort``, ``cwd``; else what the launch recorded);
  an equal value is no change and needs nobody's permission;
* each differing one is put to ``agent_link_check_override`` (``app.hooks.call``) with ``{"currentCwd",
  "launchedBy"}``. ``None`` (no policy plugin) allows only an effort change by the thread's
  launcher (recorded in ``codex_launches`` by ``launch_codex_thread``) and refuses the rest;
* a refusal raises ``permission_denied`` with the hook's reason
  (``model_switch_requires_fork_or_opt_in``, ``effort_not_permitted``,
  ``cwd_change_not_permitted``, ``cwd_outside_workspace``); nothing is stored;
* ``turn/steer`` cannot carry overrides (and ``turn/start`` on a running thread joins its turn),
  so a change aimed at a thread known to be running a turn is refused (``active_turn_conflict``).

Allowed values travel on the delivering ``turn/start`` (params ``model``, ``effort``, ``cwd``)
and are reported as ``switches``. They persist (no revert is sent).
"""

from __future__ import annotations

import os

from agent_link_core.errors import AgentLinkError, invalid_arguments
from agent_link_core.store import now_ms

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

SETTINGS = ("model", "effort", "cwd")
#: The Codex release the expected costs of switches were measured on (a model or effort switch
#: makes the next turn read the whole thread again without the prompt cache: about the input
#: tokens of its last model request; a cwd change keeps the cache). On another release the
#: figures are unverified and a switch carries ``override_costs_version_mismatch``.
OVERRIDE_COSTS_VERIFIED_ON = "0.159.2"
CWD_COST = {"uncachedInputTokens": 0, "basis": "cwd-cache-neutral"}
#: where the thread object keeps each setting (Codex 0.169.0 thread object)
THREAD_FIELDS = {"model": "model", "effort": "reasoningEffort", "cwd": "cwd"}
REFUSAL_REASONS = {
    "model": "model_switch_requires_fork_or_opt_in",
    "effort": "effort_not_permitted",
    "cwd": "cwd_change_not_permitted",
}
HINTS = {
    "model": "Ask for an override policy that lists you, or start a new thread with the model you want.",
    "effort": "Only the thread's launcher or an override policy entry may change its effort.",
    "cwd": "Only an override policy entry may change the thread's working directory, and only inside its workspace.",
}


class Launches:
    """The ``codex_launches`` table: who launched a thread and with what."""

    def __init__(self, store: Any) -> None:
        self.store = store

    def record(self, thread_id: str, launched_by: str, *, model: str | None, effort: str | None, cwd: str | None) -> None:
        with self.store.write() as conn:
            conn.execute(
                "INSERT OR REPLACE INTO codex_launches (thread_id, launched_by, model, effort, cwd, launched_at)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (thread_id, launched_by, model, effort, cwd, now_ms()),
            )

    def get(self, thread_id: str) -> Any:
        return self.store.conn.execute("SELECT * FROM codex_launches WHERE thread_id = ?", (thread_id,)).fetchone()


def requested(arguments: dict[str, Any]) -> dict[str, str]:
    """The override arguments present (non-null) in a send's arguments."""
    return {k: arguments[k] for k in SETTINGS if isinstance(arguments.get(k), str)}


def same(setting: str, previous: Any, value: str) -> bool:
    if previous is None:
        return False
    if setting == "cwd":
        return os.path.normpath(str(previous)) == os.path.normpath(value)
    return str(previous) == value


def check_send(message: Any, context: Any, app: Any) -> list[dict[str, Any]] | None:
    """``agent_link_before_send`` for Codex recipients: decide the overrides (module docstring).

    Fills ``context.result["switches"]`` and ``message.metadata["codexSwitches"]``.
    :raises AgentLinkError: ``permission_denied`` (reason from the policy), ``invalid_arguments``
        for a relative cwd, ``active_turn_conflict`` for overrides aimed at a running turn.
    """
    recipient = str(message.recipient)
    if not recipient.startswith("codex:"):
        return None
    arguments = context.arguments or {}
    warnings = deprecation_warnings(arguments)
    escape_hatch = arguments.get("allowTargetOverride") is True
    wanted = requested(arguments)
    if not wanted:
        return warnings or None
    harness = app.harnesses.get("codex")
    if harness is None:
        return warnings or None
    if "cwd" in wanted and not os.path.isabs(wanted["cwd"]):
        raise invalid_arguments([{"path": "cwd", "rule": "absolute_path", "expected": "an absolute path"}])
    thread_id = recipient.split(":", 1)[1]
    current, status = harness.thread_settings(thread_id)
    launch = harness.launches.get(thread_id)
    launched_by = launch["launched_by"] if launch is not None else None
    sender = message.sender
    switches: list[dict[str, Any]] = []
    basis: tuple[int | None, str | None] | None = None  # read once, only when a switch needs it
    for setting, value in wanted.items():
        previous = current.get(setting)
        if same(setting, previous, value):
            continue
        granted = _decision(app, recipient, sender, setting, value, previous, current, launched_by, escape_hatch).get("grantedBy") or {}
        if setting != "cwd" and basis is None:
            basis = harness.switch_cost_basis(thread_id)
        switch: dict[str, Any] = {"setting": setting, "previous": previous, "current": value,
                                  "grantedBy": granted.get("rule", "policy") if isinstance(granted, dict) else str(granted),
                                  "persists": True, "expectedCost": expected_cost(setting, basis)}
        if isinstance(granted, dict) and granted.get("rule") == "policy":
            switch["policy"] = {k: granted.get(k) for k in ("policyKey", "entry")}
        switches.append(switch)
    if switches:
        _record(message, context, switches, status, lambda: (basis or harness.switch_cost_basis(thread_id))[1], warnings)
    return warnings or None


def _record(message: Any, context: Any, switches: list[dict[str, Any]], status: str | None, version_of: Callable[[], str | None],
            warnings: list[dict[str, Any]]) -> None:
    """Put the granted ``switches`` in the send's result and the message's metadata (a warning when their costs were
    measured on another Codex version than ``version_of()``). :raises AgentLinkError: ``active_turn_conflict`` when the
    thread runs a turn."""
    if status == "active":
        # turn/steer carries no overrides, and turn/start on a running thread joins its turn
        raise AgentLinkError(
            "active_turn_conflict",
            f"{message.recipient} is running a turn; turn/steer cannot change its {', '.join(s['setting'] for s in switches)}.",
            {"status": "active", "activeTurnId": None, "settings": [s["setting"] for s in switches]},
            hint="Wait until the thread is idle (wait_for_codex_thread), then send again with the change.",
        )
    if (version := version_of()) != OVERRIDE_COSTS_VERIFIED_ON:
        warnings.append({"code": "override_costs_version_mismatch",
                         "message": f"The expected costs of these switches were measured on Codex {OVERRIDE_COSTS_VERIFIED_ON}; "
                                    f"this thread runs on {'Codex ' + version if version else 'an unknown Codex version'}, "
                                    "so treat them as estimates.",
                         "details": {"verifiedOn": OVERRIDE_COSTS_VERIFIED_ON, "codexVersion": version}})
    context.result["switches"] = switches
    message.metadata["codexSwitches"] = [{k: s[k] for k in ("setting", "previous", "current", "grantedBy", "expectedCost")}
                                         for s in switches]


def _decision(app: Any, recipient: str, sender: Any, setting: str, value: str, previous: Any, current: dict[str, Any],
              launched_by: str | None, escape_hatch: bool) -> dict[str, Any]:
    """Whether ``sender`` may change ``setting`` of ``recipient`` to ``value``: a plugin's ``agent_link_check_override``
    answer, else the default rule; the deprecated ``allowTargetOverride`` grants a refused change.
    :raises AgentLinkError: ``permission_denied`` (reason from the policy) for a refused change."""
    decision = app.hooks.call("agent_link_check_override", target=recipient, sender=sender, setting=setting, value=value,
                              context={"currentCwd": current.get("cwd"), "launchedBy": launched_by})
    if decision is None:
        decision = default_decision(recipient, sender.address, setting, launched_by)
    if not decision.get("allowed") and escape_hatch:
        # deprecated escape hatch: still grants the change (reference §19), with a warning
        decision = {"allowed": True, "grantedBy": {"rule": "allowTargetOverride"}}
    if decision.get("allowed"):
        return decision
    details = {"reason": decision.get("reason") or REFUSAL_REASONS[setting], "setting": setting, "requested": value,
               "current": previous, "target": recipient}
    if decision.get("workspace") is not None:
        details["workspace"] = decision["workspace"]
    raise AgentLinkError("permission_denied", decision.get("message") or f"{recipient} keeps its {setting}.", details,
                         hint=hint_for(setting, app))


def expected_cost(setting: str, basis: tuple[int | None, str | None] | None) -> dict[str, Any] | None:
    """A switch's ``expectedCost``: ``{uncachedInputTokens, basis}`` (a cwd change costs 0; a
    model or effort change about the last request's input tokens, ``basis``
    ``last-turn-input``), None when the thread's token counts are unknown."""
    if setting == "cwd":
        return dict(CWD_COST)
    tokens = basis[0] if basis is not None else None
    return {"uncachedInputTokens": tokens, "basis": "last-turn-input"} if tokens is not None else None


#: deprecated send arguments: name → what it does now (reference §5.1, §19)
DEPRECATED = {
    "allowTargetOverride": "allowTargetOverride is deprecated: it still grants a model/effort/cwd change the override policy "
                           "refuses, but will stop doing so; ask for an override policy entry (set_agent_override_policy) instead.",
    "allowParallelTurn": "allowParallelTurn is deprecated and ignored: a message to a running thread is steered into its turn.",
}


def deprecation_warnings(arguments: dict[str, Any]) -> list[dict[str, Any]]:
    """``deprecated_argument`` warnings for the deprecated send arguments present (not null)."""
    return [{"code": "deprecated_argument", "message": text, "details": {"argument": name}}
            for name, text in DEPRECATED.items() if arguments.get(name) is not None]


#: receipt action and kind of a granted switch, per setting
SWITCH_RECEIPTS = {"model": ("model_switch", "model-switch"), "effort": ("effort_change", "effort-change"),
                   "cwd": ("cwd_change", "cwd-change")}


def switch_events(event: Any, app: Any) -> list[Any]:
    """The events of a stored send to a Codex thread (its ``sent`` event) that granted
    switches: one per switch (``model_switch``, ``effort_change``, ``cwd_change``), so that the
    receipts plugin writes one receipt per switch, with the send's provenance. Reads the row
    on ``app``'s connection, so inside the send's transaction it sees the uncommitted row.

    A send still in progress (``event.result`` set) gets ``switchReceipts``: per switch
    ``{action, setting, record, recorded, id}``, which a receipt writer completes (``recorded``,
    ``id``) when it stores the receipt; ``recorded`` stays false when no plugin writes one."""
    from agent_link_core.records import Event

    if event.kind != "sent" or event.message_id is None:
        return []
    if not str(event.data.get("to", "")).startswith("codex:"):
        # check_send grants switches to Codex recipients only (the "sent" event names the
        # recipient): any other send skips reading its row back, on every send's hot path
        return []
    row = app.mailbox.get_row(event.message_id)
    if row is None:
        return []
    events = []
    meta = app.mailbox.row_dict(row)["metadata"]
    stored = meta.get("receipt") or {}
    record = stored.get("record", True)
    for switch in meta.get("codexSwitches") or ():
        kind, receipt_kind = SWITCH_RECEIPTS[switch["setting"]]
        slot = None
        if event.result is not None:
            slot = {"action": kind, "setting": switch["setting"], "record": record, "recorded": False, "id": None}
            event.result.setdefault("switchReceipts", []).append(slot)
        events.append(Event(kind, event.message_id, event.at_ms, event.actor, {
            "target": row["recipient"], "kind": receipt_kind, "origin": stored.get("origin"),
            "receipt": {"record": record, "purpose": stored.get("purpose"), "tags": stored.get("tags") or [],
                        "cleanupRecommendation": stored.get("cleanupRecommendation")},
            "setting": switch["setting"], "previous": switch["previous"], "current": switch["current"],
            "grantedBy": switch["grantedBy"], "expectedCost": switch.get("expectedCost"),
        }, result={"receipt": slot} if slot is not None else None))
    return events


#: the model hint when a plugin offers the fork tool (the forks plugin, agent-link-forks)
FORK_TOOL = "fork_codex_thread"
FORK_HINT = "Fork the thread with the new model (fork_codex_thread keeps the original's cache), or ask for an override policy that lists you."


def hint_for(setting: str, app: Any) -> str:
    """The refusal hint for ``setting``; the model hint names the fork tool only when a loaded
    plugin registers it (so it never points at a tool that is not there)."""
    if setting == "model":
        try:
            if FORK_TOOL in app.hooks.tools():
                return FORK_HINT
        except AgentLinkError:  # clashing tool registrations: say nothing about the fork tool
            pass
    return HINTS[setting]


def default_decision(target: str, sender: str, setting: str, launched_by: str | None) -> dict[str, Any]:
    """The decision without a policy plugin: the launcher may change effort, nothing else."""
    if setting == "effort" and launched_by and launched_by == sender and launched_by != "external":
        return {"allowed": True, "grantedBy": {"rule": "launcher"}}
    why = "only its launcher may change its effort" if setting == "effort" else "no override policy plugin is installed"
    return {"allowed": False, "reason": REFUSAL_REASONS[setting], "message": f"{target} keeps its {setting}: {why}."}


def turn_params(options: dict[str, Any] | Any) -> dict[str, str]:
    """The ``turn/start`` parameters carrying allowed overrides (docs/hosts/codex.md §7)."""
    return {k: options[k] for k in SETTINGS if isinstance(options.get(k), str)}
