"""Override policy: who may change an existing session's model, effort or working directory.

An existing thread keeps its model, effort and cwd: a prompt cache is per model, so a switch
makes the next turn re-read the whole history uncached. A change is allowed only when

* the sender launched the thread and the change is to ``effort`` (``context.launchedBy``), or
* the target's policy in roles.json lists the sender for that setting. The policy is keyed by
  the target's address and by ``role:<name>`` for each role the target holds; an entry is
  ``*`` (any sender with an identity, never ``external``), ``role:<name>`` (that role's current
  holder) or an exact address. ``model`` also covers a model provider or service tier change.

A ``cwd`` change must moreover stay inside the thread's workspace: the git top level of its
current cwd (the cwd itself outside a repository), both sides with symlinks resolved. Leaving
it is refused with ``cwd_outside_workspace`` whatever the policy says.

An unreadable roles.json allows nothing (the launcher rule still applies). Harness plugins ask
through :func:`evaluate_override` (hook ``agent_link_check_override``), then refuse with
``permission_denied`` and the decision's ``reason``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from agent_link_core.errors import AgentLinkError, invalid_arguments
from agent_link_core.model import is_address

from agent_link_roles.table import POLICY_SETTINGS, RoleTable, load_table

REFUSAL_REASONS = {
    "model": "model_switch_requires_fork_or_opt_in",
    "effort": "effort_not_permitted",
    "cwd": "cwd_change_not_permitted",
}
OUTSIDE_WORKSPACE = "cwd_outside_workspace"


def workspace_of(cwd: str) -> str:
    """The workspace of a thread whose cwd is ``cwd``: the nearest folder at or above its real
    path holding ``.git`` (folder or file, as in worktrees), else the real cwd itself."""
    real = Path(os.path.realpath(cwd))
    for folder in (real, *real.parents):
        if os.path.lexists(folder / ".git"):
            return str(folder)
    return str(real)


def inside(path: str, workspace: str) -> bool:
    """True when the real path of ``path`` is ``workspace`` or below it."""
    real = os.path.realpath(path)
    return os.path.commonpath([real, workspace]) == workspace


def sender_matches(entry: str, sender: str, table: RoleTable, verified: bool = True) -> bool:
    """Does a policy entry name ``sender``? ``*`` needs a runtime identity: a real address
    (never ``external``) that the runtime attested (``verified``), not one a process merely
    claimed with ``AGENT_LINK_ADDRESS`` or ``--from``."""
    if not is_address(sender) or sender.startswith("role:"):
        return False
    if entry == "*":
        return verified
    if entry.startswith("role:"):
        return table.holder(entry[5:]) == sender
    return entry == sender


def policy_keys(table: RoleTable, target: str) -> list[str]:
    """The policy entries that apply to ``target``: its address, then each role it holds."""
    if target.startswith("role:"):
        holder = table.holder(target[5:])
        return [target] + ([holder] if holder else [])
    return [target] + [f"role:{name}" for name in table.roles_held_by(target)]


def effective_policy(table: RoleTable, target: str) -> dict[str, list[str]]:
    """The union of every applicable entry, per setting (for display)."""
    merged: dict[str, list[str]] = {}
    for key in policy_keys(table, target):
        for setting, entries in table.policy.get(key, {}).items():
            bucket = merged.setdefault(setting, [])
            bucket.extend(e for e in entries if e not in bucket)
    return merged


def evaluate_override(
    state_dir: Path, target: str, sender: str, setting: str, value: str, context: dict[str, Any] | None = None,
    *, sender_verified: bool = True,
) -> dict[str, Any]:
    """Decide whether ``sender`` may change ``setting`` of the existing session ``target``.

    :param target: the session's address.
    :param sender: the sender's address (``external`` when it has no identity).
    :param sender_verified: whether the runtime attested that address (``Caller.verified``);
        an unverified sender never matches a ``*`` entry.
    :param setting: ``model``, ``effort`` or ``cwd``.
    :param value: the requested value (for ``cwd`` an absolute path).
    :param context: ``currentCwd`` (the session's cwd; needed for ``cwd``), ``launchedBy``
        (who launched the session through agent-link, when known).
    :returns: ``{"allowed": True, "grantedBy": {"rule": "launcher"|"policy", "policyKey"?,
        "entry"?}}`` or ``{"allowed": False, "reason": <permission_denied reason>, "message",
        "workspace"?}``.
    :raises AgentLinkError: ``invalid_arguments`` for an unknown setting or a relative cwd.
    """
    context = context or {}
    if setting not in POLICY_SETTINGS:
        raise invalid_arguments([{"path": "setting", "rule": "enum", "expected": "model | effort | cwd"}])
    if setting == "cwd":
        if not os.path.isabs(value):
            raise invalid_arguments([{"path": "cwd", "rule": "absolute_path", "expected": "an absolute path"}])
        current = context.get("currentCwd")
        workspace = workspace_of(current) if current else None
        if workspace is None or not inside(value, workspace):
            return {
                "allowed": False, "reason": OUTSIDE_WORKSPACE, "workspace": workspace,
                "message": "The new working directory must stay inside the session's workspace "
                           "(the git top level of its current folder).",
            }
    if setting == "effort" and context.get("launchedBy") and context["launchedBy"] == sender:
        return {"allowed": True, "grantedBy": {"rule": "launcher"}}
    try:
        table = load_table(state_dir)
    except AgentLinkError:
        table = None
    if table is not None:
        for key in policy_keys(table, target):
            for entry in table.policy.get(key, {}).get(setting, ()):
                if sender_matches(entry, sender, table, sender_verified):
                    return {"allowed": True, "grantedBy": {"rule": "policy", "policyKey": key, "entry": entry}}
    why = "roles.json cannot be read, so no override is allowed" if table is None else f"no override policy lets {sender} change it"
    return {
        "allowed": False, "reason": REFUSAL_REASONS[setting],
        "message": f"{target} keeps its {setting}: {why}.",
    }
