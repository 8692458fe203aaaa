"""The project binding file ``<projectRoot>/.codex/project-orchestrator.json``.

It names a project's orchestrator thread. Every field is a required non-empty string::

    {"projectRoot": "/work/shop", "projectId": "shop", "orchestratorThreadId": "019a...",
     "role": "project_orchestrator", "policyVersion": "v1",
     "createdAt": "2026-11-30T10:00:00Z", "lastVerifiedAt": "2026-11-30T10:00:00Z"}

* ``role`` must be ``project_orchestrator``; ``createdAt`` and ``lastVerifiedAt`` must parse as
  ISO 8601 dates;
* ``projectRoot`` must equal the requested root after plain path resolution
  (:func:`plain_root`: absolute, ``..`` and duplicate slashes removed, symlinks NOT resolved);
  a binding for a parent or child directory does not count;
* a missing file means "no binding"; a file that cannot be read, is not JSON or breaks a rule
  is an error naming the field. It is never worked around (no fallback to search).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from agent_link_core.errors import AgentLinkError

BINDING_DIR = ".codex"
BINDING_NAME = "project-orchestrator.json"
BINDING_ROLE = "project_orchestrator"
FIELDS = ("projectRoot", "projectId", "orchestratorThreadId", "role", "policyVersion", "createdAt", "lastVerifiedAt")
DATE_FIELDS = ("createdAt", "lastVerifiedAt")
# a binding is a few hundred bytes; a huge file is a mistake, not a binding
MAX_BYTES = 64 * 1024


def plain_root(path: str) -> str:
    """``path`` made absolute and normalised the plain way (no symlink resolution)."""
    return os.path.abspath(path)


def binding_path(project_root: str) -> Path:
    """Where the binding of ``project_root`` lives."""
    return Path(plain_root(project_root)) / BINDING_DIR / BINDING_NAME


@dataclass(frozen=True)
class Binding:
    """A valid binding file.

    :param fields: the seven fields as found (strings).
    :param path: the file it was read from.
    """

    fields: dict[str, str]
    path: Path

    @property
    def thread_id(self) -> str:
        """The orchestrator thread id (a bare id; a ``codex:`` prefix is removed)."""
        return self.fields["orchestratorThreadId"].removeprefix("codex:")

    @property
    def project_id(self) -> str:
        """The binding's ``projectId``."""
        return self.fields["projectId"]

    @property
    def policy_version(self) -> str:
        """The binding's ``policyVersion``."""
        return self.fields["policyVersion"]

    def view(self) -> dict[str, Any]:
        """The binding as shown in results: its fields plus ``path``."""
        return {**self.fields, "path": str(self.path)}


def invalid(path: Path, field: str, rule: str, expected: str) -> AgentLinkError:
    """The error for a binding file that breaks a rule (``invalid_arguments`` naming the field)."""
    return AgentLinkError(
        "invalid_arguments", f"The project binding file {path} is invalid: {field} must be {expected}.",
        {"errors": [{"path": f"binding.{field}" if field else "binding", "rule": rule, "expected": expected}],
         "bindingPath": str(path)},
        hint="Fix or remove the binding file; agent-link does not guess around an invalid binding.",
    )


def _is_date(value: str) -> bool:
    try:
        datetime.fromisoformat(value)  # Python 3.11 reads a trailing Z
    except ValueError:
        return False
    return True


def read_binding(project_root: str) -> Binding | None:
    """Read and validate the binding of ``project_root``.

    :returns: the :class:`Binding`, or None when the file does not exist.
    :raises AgentLinkError: ``invalid_arguments`` (``details.errors[0].path`` names the field as
        ``binding.<field>``, ``details.bindingPath`` the file) for an unreadable, non-JSON or
        invalid file.
    """
    root = plain_root(project_root)
    path = binding_path(root)
    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_BYTES + 1)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise invalid(path, "", "unreadable", f"a readable file ({exc.strerror or type(exc).__name__})") from None
    if len(data) > MAX_BYTES:
        raise invalid(path, "", "size", f"at most {MAX_BYTES} bytes")
    try:
        raw = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise invalid(path, "", "json", "a UTF-8 JSON object") from None
    if not isinstance(raw, dict):
        raise invalid(path, "", "type", "a JSON object")
    for name in FIELDS:
        value = raw.get(name)
        if not isinstance(value, str) or not value.strip():
            raise invalid(path, name, "required", "a non-empty string")
    if raw["role"] != BINDING_ROLE:
        raise invalid(path, "role", "enum", f'"{BINDING_ROLE}"')
    for name in DATE_FIELDS:
        if not _is_date(raw[name]):
            raise invalid(path, name, "format", "an ISO 8601 date")
    if plain_root(raw["projectRoot"]) != root:
        raise invalid(path, "projectRoot", "mismatch", f"the requested project root {root}")
    return Binding({name: raw[name] for name in FIELDS}, path)
