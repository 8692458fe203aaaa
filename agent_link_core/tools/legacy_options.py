"""Send-option schemas the core used to declare itself, kept for plugins built against them.

Options only some hosts understand are now declared by their harness
(:class:`~agent_link_core.harness.SendOption`), and ``message_agent`` takes its options from
there; nothing in the core reads these. Plugins that copy a schema into tools of their own
(``core_tools.DELIVERY_OPTIONS["effort"]``) keep working; new code declares its own.
"""

from __future__ import annotations

from typing import Any

from agent_link_core.tools.schemas import BOOL, PATH, STR

DELIVERY_OPTIONS: dict[str, Any] = {
    "cwd": {**PATH, "description": "Working directory change request for the target (absolute)."},
    "mode": {"type": "string", "enum": ["auto", "start_turn", "steer_active"], "description": "How to deliver into a turn-based session."},
    "resumeIfNeeded": {"type": "boolean", "description": "Resume an unloaded session first (default true)."},
    "expectedTurnId": STR,
    "model": {"type": "string", "description": "Model change request (subject to the override policy)."},
    "effort": {"type": "string", "enum": ["minimal", "low", "medium", "high", "xhigh"]},
    "allowParallelTurn": BOOL,
}
TURN_OVERRIDES = ("cwd", "model", "effort")
