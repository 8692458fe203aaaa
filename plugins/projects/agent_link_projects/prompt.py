"""The worker prompt of ``launch_project_worker`` and the inert form of project labels.

Sections, in order: a line naming the worker role and the project; a return path (the
orchestrator thread, how to report back with ``return_project_work_result`` once finished or
blocked, and to leave the Codex Desktop app alone); the project context (root, id, policy
version); the task; optional extra instructions.
"""

from __future__ import annotations

import re
import unicodedata

DEFAULT_ROLE = "project worker"
DEFAULT_POLICY_VERSION = "v0"
UNKNOWN_PROJECT = "(unknown project)"
MAX_LABEL = 128
RESULT_FIELDS = ("resultStatus", "summary", "changedPaths", "testsRun", "blockers", "nextSteps", "details")
_SPACE = re.compile(r"\s+")


def inert(value: str | None) -> str | None:
    """A label safe to put on a prompt line: control characters, U+2028/U+2029 and backticks
    become spaces, whitespace runs collapse, ends are trimmed, at most 128 characters. None
    (or nothing left) gives None."""
    if value is None:
        return None
    chars = [" " if ch in "`\u2028\u2029" or unicodedata.category(ch) in ("Cc", "Cf") else ch for ch in value]
    text = _SPACE.sub(" ", "".join(chars)).strip()[:MAX_LABEL].strip()
    return text or None


def worker_prompt(*, role: str, orchestrator_thread_id: str, project_root: str | None, project_id: str | None,
                  policy_version: str | None, task: str, instructions: str | None,
                  leased: list[str] | None = None) -> str:
    """The first message of a worker thread.

    :param role: the worker role label (made inert here).
    :param orchestrator_thread_id: where results go (a bare Codex thread id).
    :param project_id / policy_version: made inert here; None gives the placeholders.
    :param leased: the paths claimed for the worker (``leasePaths``, each made inert), or None.
    """
    label = inert(role) or DEFAULT_ROLE
    pid = inert(project_id)
    policy = inert(policy_version) or DEFAULT_POLICY_VERSION
    where = f'threadId "{orchestrator_thread_id}"'
    if pid:
        where += f', projectId "{pid}"'
    if project_root:
        where += f', projectRoot "{project_root}"'
    lines = [
        f"You are the {label} for project {pid or UNKNOWN_PROJECT}.",
        "",
        "Return path:",
        f"- Orchestrator thread: {orchestrator_thread_id}",
        ("- When the task is finished, or as soon as you are blocked, report back by calling the agent-link MCP tool "
         f"return_project_work_result with {where}, resultStatus (done, done_with_concerns or "
         "blocked), summary, changedPaths, testsRun, blockers, nextSteps and details, and replyToMessageId set to the id "
         "of this message (the id attribute of its agent-link-message envelope)."),
        "- Leave the Codex Desktop app alone: do not open it, click in it or type into it.",
        "",
        "Project context:",
        f"- Project root: {project_root or 'not supplied'}",
        f"- Project id: {pid or 'not supplied'}",
        f"- Policy version: {policy}",
        *([f"- Leased for you (exclusive, until this task message is resolved): {', '.join(inert(p) or '?' for p in leased)}. "
           "Other sessions' edits of them are refused; call release_paths for any you finish with early."] if leased else []),
        "",
        "Task:",
        task,
    ]
    if instructions and instructions.strip():
        lines += ["", "Additional instructions:", instructions]
    return "\n".join(lines)
