"""What Codex adds to core tools (the codex plugin's ``agent_link_extend_tools``): ``message_agent``'s send options,
which reach :meth:`~agent_link_codex.harness.CodexHarness.deliver` and are refused for other hosts' sessions
(``agent_link_tool_send``: :func:`check_target`), and its result fields (``Delivery.fields``); ``agent_link_health``'s
``startAppServer``, which :meth:`~agent_link_codex.harness.CodexHarness.prepare_health` reads."""

from __future__ import annotations

from agent_link_core.errors import AgentLinkError, invalid_arguments
from agent_link_core.tools.schemas import PATH

from agent_link_codex.overrides import SETTINGS

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from agent_link_core.app import App

#: the message_agent arguments a Codex thread understands
SEND_OPTIONS: dict[str, dict[str, Any]] = {
    "mode": {"type": "string", "enum": ["auto", "start_turn", "steer_active"],
             "description": "How to deliver into a Codex thread: auto, start a turn, or steer the running one."},
    "resumeIfNeeded": {"type": "boolean", "description": "Resume an unloaded thread first (default true)."},
    "expectedTurnId": {"type": "string", "description": "Steer only if this turn is still the active one."},
    "model": {"type": "string", "description": "Model change request (subject to the override policy)."},
    "effort": {"type": "string", "enum": ["minimal", "low", "medium", "high", "xhigh"],
               "description": "Reasoning effort change request (subject to the override policy)."},
    "cwd": {**PATH, "description": "Working directory change request for the thread (absolute)."},
    # deprecated (overrides.DEPRECATED): accepted with a deprecated_argument warning
    "allowParallelTurn": {"type": "boolean", "description": "Deprecated and ignored (a warning says so)."},
    "allowTargetOverride": {"type": "boolean", "description": "Deprecated: still grants a model/effort/cwd change the "
                                                              "override policy refuses, with a warning."},
}
#: what a send to a Codex thread adds to message_agent's result (``Delivery.fields``)
SEND_RESULT_FIELDS: dict[str, dict[str, Any]] = {
    "turnId": {"type": ["string", "null"]}, "threadId": {"type": "string"}, "switches": {"type": "array"},
    "switchReceipts": {"type": "array"},
    # the separate facts of a send (send_facets)
    "runtimeState": {"type": ["object", "null"]}, "archiveState": {"type": ["string", "null"]},
    "desktopVisibility": {"type": ["object", "null"]}, "peerMessage": {"type": ["object", "null"]},
    "turn": {"type": ["object", "null"]}}
#: what agent_link_health takes for Codex
HEALTH_OPTIONS: dict[str, dict[str, Any]] = {"startAppServer": {"type": "boolean", "description": (
    "true: connect to Codex (starting the private app-server if needed) so the prompt hook's trust can be read; "
    "false: probe nothing, not even `codex --version`; absent: only the version probe.")}}
#: ``agent_link_extend_tools``'s answer
EXTENSIONS = {"message_agent": {"input": SEND_OPTIONS, "output": SEND_RESULT_FIELDS}, "agent_link_health": {"input": HEALTH_OPTIONS}}


def check_target(arguments: dict[str, Any], recipient: str, app: App) -> None:
    """``agent_link_tool_send``: refuse the :data:`SEND_OPTIONS` given for a session that is no Codex thread, but for
    those its own host's plugin adds too (:meth:`~agent_link_core.plugins.Hooks.host_arguments`).

    :raises AgentLinkError: ``unsupported`` (``details.capability`` ``turn_overrides``) for the turn overrides
        (:data:`SETTINGS`), else ``invalid_arguments`` (rule ``unsupported_for_target``).
    """
    given = [k for k in SEND_OPTIONS if k in arguments]
    if recipient.startswith("codex:") or not given:
        return
    theirs = app.hooks.host_arguments(recipient)
    if lacking := [k for k in SETTINGS if k in given and k not in theirs]:
        raise AgentLinkError("unsupported", f"{recipient} cannot take {', '.join(lacking)} changes.",
                             {"capability": "turn_overrides", "arguments": lacking}, hint=f"Send without {', '.join(lacking)}.")
    if others := [k for k in given if k not in theirs]:
        raise invalid_arguments([{"path": k, "rule": "unsupported_for_target", "expected": "omit it for this target"} for k in others])
