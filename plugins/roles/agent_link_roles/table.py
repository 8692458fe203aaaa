"""The role table ``<state>/roles.json``: the user's own configuration, editable by hand.

Format (version 1)::

    {"version": 1,
     "enforcement": "off" | "warn" | "enforce",
     "roles": {"<name>": {"address": "<harness>:<id>", "assignedAt": "<ISO 8601>",
                          "projects": {"<absolute project root>": "<address>"},
                          "leasePaths": ["<file, directory or glob>", ...], "leaseRoot": "<absolute project root>"}},
     "overridePolicy": {"role:<name>" | "<address>": {"model": [...], "effort": [...], "cwd": [...]}}}

Rules:

* validated on every read: an invalid entry is ignored and reported in ``problems``
  (``{path, rule, message}``), the rest still works; a missing file is an empty table;
* a file that is not JSON (or cannot be read) is ``state_io_error``: nothing is guessed;
* a hand-edited list of addresses as a role's ``address`` is kept as several holders, which
  makes ``role:<name>`` ambiguous rather than picking one;
* ``projects`` is accepted on the ``orchestrator`` role only;
* ``leasePaths`` (with ``leaseRoot``) are the files the role owns: ``set_agent_role`` leases
  them for the holder (``agent_link_roles.tools``); the table only records them;
* writers (:func:`update_table`) hold the lock, re-read the file, change only the keys they own,
  keep everything else (unknown keys, even invalid entries of other roles) and refuse a file
  whose ``version`` is not 1.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

from agent_link_core.errors import AgentLinkError, invalid_arguments
from agent_link_core.addresses import ROLE_NAME_RE
from agent_link_core.model import is_address
from agent_link_roles.context import TABLE_FILE
from agent_link_roles.files import atomic_write, io_error, locked, os_error, relative

TABLE_VERSION = 1
ENFORCEMENT_MODES = ("off", "warn", "enforce")
POLICY_SETTINGS = ("model", "effort", "cwd")
MAX_POLICY_ENTRIES = 50
#: the most paths a role may own (as many as one lease_paths call takes)
MAX_LEASE_PATHS = 100
ORCHESTRATOR = "orchestrator"
# roles.json is a small config file; refusing huge ones keeps a bad edit from eating memory.
MAX_TABLE_BYTES = 1024 * 1024

T = TypeVar("T")


def table_path(state_dir: Path) -> Path:
    """Where the role table lives: ``<state dir>/roles.json``."""
    return state_dir / TABLE_FILE


def is_holder_address(value: object) -> bool:
    """True for an address that can hold a role: well formed and not itself ``role:``."""
    return is_address(value) and not str(value).startswith("role:")


def parse_role_name(value: str, path: str = "role") -> str:
    """The bare role name from ``name`` or ``role:<name>``.

    :raises AgentLinkError: ``invalid_arguments`` (rule ``pattern``) naming ``path``.
    """
    name = value[5:] if value.startswith("role:") else value
    if not ROLE_NAME_RE.fullmatch(name):
        raise invalid_arguments([{"path": path, "rule": "pattern", "expected": "a role name ^[a-z0-9-]{1,40}$, optionally as role:<name>"}])
    return name


def is_policy_key(value: object) -> bool:
    """A valid override-policy target: ``role:<name>`` or a holder address."""
    if not isinstance(value, str):
        return False
    if value.startswith("role:"):
        return bool(ROLE_NAME_RE.fullmatch(value[5:]))
    return is_holder_address(value)


def is_policy_entry(value: object) -> bool:
    """A valid sender entry of a policy setting: ``*``, ``role:<name>`` or an address."""
    return value == "*" or is_policy_key(value)


@dataclass(frozen=True)
class Role:
    """One valid role entry.

    :param name: the bare role name.
    :param holders: ``()`` when unassigned, one address normally, several when hand-edited as
        a list (then the role is ambiguous and resolves to nobody).
    :param assigned_at: ISO 8601 time the current holder was assigned, when recorded.
    :param projects: ``{absolute project root: address}`` (orchestrator role only).
    :param lease_paths: the files, directories or globs the role owns (relative to
        ``lease_root`` or absolute inside it); ``()`` for none.
    :param lease_root: the absolute project root of ``lease_paths`` (None without them).
    """

    name: str
    holders: tuple[str, ...] = ()
    assigned_at: str | None = None
    projects: dict[str, str] = field(default_factory=dict)
    lease_paths: tuple[str, ...] = ()
    lease_root: str | None = None

    @property
    def address(self) -> str | None:
        """The single holder, or None (unassigned or ambiguous)."""
        return self.holders[0] if len(self.holders) == 1 else None

    @property
    def role_address(self) -> str:
        """``role:<name>``."""
        return f"role:{self.name}"


@dataclass
class RoleTable:
    """The validated content of roles.json.

    :param path: the file.
    :param exists: whether the file exists.
    :param version: the ``version`` value found (None when missing or no file).
    :param enforcement: the file's enforcement mode when valid, else None.
    :param roles: valid roles by name.
    :param policy: ``{target: {setting: (entries...)}}``, valid entries only.
    :param problems: ``[{path, rule, message}]`` for everything ignored.
    """

    path: Path
    exists: bool
    version: Any = None
    enforcement: str | None = None
    roles: dict[str, Role] = field(default_factory=dict)
    policy: dict[str, dict[str, tuple[str, ...]]] = field(default_factory=dict)
    problems: list[dict[str, str]] = field(default_factory=list)

    def holder(self, name: str) -> str | None:
        """The single holder of ``name``, or None."""
        role = self.roles.get(name)
        return role.address if role is not None else None

    def roles_held_by(self, address: str) -> list[str]:
        """Names of the roles ``address`` holds directly (ambiguous entries count for none)."""
        return sorted(name for name, role in self.roles.items() if role.address == address)

    def projects_held_by(self, address: str) -> list[tuple[str, str]]:
        """``[(role name, project root)]`` for project-scoped assignments of ``address``."""
        return sorted((name, root) for name, role in self.roles.items() for root, holder in role.projects.items() if holder == address)

    def is_persistent(self, address: str) -> bool:
        """True when ``address`` holds any role, directly or for a project."""
        return bool(self.roles_held_by(address) or self.projects_held_by(address))


def load_table(state_dir: Path) -> RoleTable:
    """Read and validate roles.json (never writes anything).

    :raises AgentLinkError: ``state_io_error`` when the file cannot be read, is larger than
        1 MiB, is not UTF-8 or is not JSON (``details.path`` is ``roles.json``).
    """
    path = table_path(state_dir)
    raw = _read_raw(path, state_dir)
    if raw is _MISSING:
        return RoleTable(path, exists=False)
    return validate(raw, path)


_MISSING: Any = object()


def _read_raw(path: Path, state_dir: Path) -> Any:
    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_TABLE_BYTES + 1)
    except FileNotFoundError:
        return _MISSING
    except OSError as exc:
        raise os_error(path, exc, state_dir) from exc
    if len(data) > MAX_TABLE_BYTES:
        raise io_error(path, state_dir, "EFBIG", f"{relative(path, state_dir)} is larger than {MAX_TABLE_BYTES} bytes, so it is not read.")
    try:
        return json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        where = f" (line {exc.lineno}, column {exc.colno})" if isinstance(exc, json.JSONDecodeError) else ""
        where += " (nested too deeply)" if isinstance(exc, RecursionError) else ""
        raise AgentLinkError(
            "state_io_error",
            f"{relative(path, state_dir)} is not valid JSON{where}, so no role can be looked up.",
            {"path": relative(path, state_dir), "errno": "EINVAL"},
            hint="Fix the file by hand (or move it away); agent-link does not guess what it meant.",
        ) from None


def _problem(problems: list[dict[str, str]], path: str, rule: str, message: str) -> None:
    problems.append({"path": path, "rule": rule, "message": message})


def _valid_time(value: object) -> bool:
    if not isinstance(value, str):
        return False
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).tzinfo is not None
    except ValueError:
        return False


def validate(raw: Any, path: Path) -> RoleTable:
    """Turn parsed roles.json content into a :class:`RoleTable`, listing what was ignored."""
    table = RoleTable(path, exists=True)
    problems = table.problems
    if not isinstance(raw, dict):
        _problem(problems, "", "type", "The file must hold a JSON object; nothing in it is used.")
        return table
    table.version = raw.get("version")
    if table.version != TABLE_VERSION:
        _problem(problems, "version", "version",
                 f'"version" must be {TABLE_VERSION}; the file is read but agent-link will not write it.')
    if "enforcement" in raw:
        if raw["enforcement"] in ENFORCEMENT_MODES:
            table.enforcement = raw["enforcement"]
        else:
            _problem(problems, "enforcement", "enum", "enforcement must be off, warn or enforce; ignored.")
    roles = raw.get("roles", {})
    if not isinstance(roles, dict):
        _problem(problems, "roles", "type", '"roles" must be an object; no role is used.')
        roles = {}
    for name, entry in roles.items():
        role = _validate_role(name, entry, problems)
        if role is not None:
            table.roles[name] = role
    policy = raw.get("overridePolicy", {})
    if not isinstance(policy, dict):
        _problem(problems, "overridePolicy", "type", '"overridePolicy" must be an object; no override is allowed.')
        policy = {}
    for target, settings in policy.items():
        entry = _validate_policy(target, settings, problems)
        if entry:
            table.policy[target] = entry
    return table


def _validate_role(name: str, entry: Any, problems: list[dict[str, str]]) -> Role | None:
    where = f"roles.{name}"
    if not ROLE_NAME_RE.fullmatch(name):
        _problem(problems, where, "pattern", "Role names must match ^[a-z0-9-]{1,40}$; this role is ignored.")
        return None
    if not isinstance(entry, dict):
        _problem(problems, where, "type", "A role must be an object; this role is ignored.")
        return None
    holders: tuple[str, ...] = ()
    address = entry.get("address")
    if isinstance(address, list):
        good = [a for a in address if is_holder_address(a)]
        if len(good) != len(address):
            _problem(problems, f"{where}.address", "address", "Entries that are not session addresses are ignored.")
        holders = tuple(dict.fromkeys(good))
    elif address is not None:
        if is_holder_address(address):
            holders = (address,)
        else:
            _problem(problems, f"{where}.address", "address", "The holder must be a session address such as <harness>:<id>; ignored.")
    assigned_at = entry.get("assignedAt")
    if assigned_at is not None and not _valid_time(assigned_at):
        _problem(problems, f"{where}.assignedAt", "format", "assignedAt must be an ISO 8601 time with a timezone; ignored.")
        assigned_at = None
    projects: dict[str, str] = {}
    if "projects" in entry:
        raw_projects = entry["projects"]
        if name != ORCHESTRATOR:
            _problem(problems, f"{where}.projects", "orchestrator_only", "Only the orchestrator role has projects; ignored.")
        elif not isinstance(raw_projects, dict):
            _problem(problems, f"{where}.projects", "type", "projects must map project roots to addresses; ignored.")
        else:
            for root, holder in raw_projects.items():
                if not os.path.isabs(root):
                    _problem(problems, f"{where}.projects.{root}", "absolute_path", "Project roots must be absolute paths; ignored.")
                elif not is_holder_address(holder):
                    _problem(problems, f"{where}.projects.{root}", "address", "A project holder must be a session address; ignored.")
                else:
                    projects[os.path.normpath(root)] = holder
    lease_paths, lease_root = _validate_lease(entry, where, problems)
    return Role(name, holders, assigned_at, projects, lease_paths, lease_root)


def _validate_lease(entry: dict[str, Any], where: str, problems: list[dict[str, str]]) -> tuple[tuple[str, ...], str | None]:
    """A role's ``leasePaths`` and ``leaseRoot``, or ``((), None)`` with a problem when unusable."""
    if "leasePaths" not in entry and "leaseRoot" not in entry:
        return (), None
    paths, root = entry.get("leasePaths"), entry.get("leaseRoot")
    if not (isinstance(paths, list) and 0 < len(paths) <= MAX_LEASE_PATHS and all(isinstance(p, str) and p for p in paths)):
        _problem(problems, f"{where}.leasePaths", "type",
                 f"leasePaths must be a list of 1 to {MAX_LEASE_PATHS} non-empty paths; the role owns no files.")
        return (), None
    if not (isinstance(root, str) and os.path.isabs(root)):
        _problem(problems, f"{where}.leaseRoot", "absolute_path", "leaseRoot must be an absolute path; the role owns no files.")
        return (), None
    return tuple(paths), os.path.normpath(root)


def _validate_policy(target: str, settings: Any, problems: list[dict[str, str]]) -> dict[str, tuple[str, ...]]:
    where = f"overridePolicy.{target}"
    if not is_policy_key(target):
        _problem(problems, where, "target", "Policy targets must be role:<name> or a session address; ignored.")
        return {}
    if not isinstance(settings, dict):
        _problem(problems, where, "type", "A policy must be an object of setting lists; ignored.")
        return {}
    out: dict[str, tuple[str, ...]] = {}
    for setting, entries in settings.items():
        if setting not in POLICY_SETTINGS:
            _problem(problems, f"{where}.{setting}", "unknown_setting", "Only model, effort and cwd can be allowed; ignored.")
            continue
        if not isinstance(entries, list):
            _problem(problems, f"{where}.{setting}", "type", "Must be a list of senders; ignored.")
            continue
        good = [e for e in entries if is_policy_entry(e)]
        if len(good) != len(entries):
            _problem(problems, f"{where}.{setting}", "entry", 'Senders must be "*", role:<name> or a session address; others are ignored.')
        if len(good) > MAX_POLICY_ENTRIES:
            _problem(problems, f"{where}.{setting}", "maxItems", f"At most {MAX_POLICY_ENTRIES} senders are read; the rest are ignored.")
            good = good[:MAX_POLICY_ENTRIES]
        if good:
            out[setting] = tuple(dict.fromkeys(good))
    return out


def update_table(state_dir: Path, mutate: Callable[[dict[str, Any]], T]) -> T:
    """Read-modify-write roles.json under its lock and replace it atomically.

    :param mutate: changes the raw JSON object in place (only the keys its tool owns) and
        returns the tool's result; raising from it, or changing nothing, writes nothing.
    :returns: what ``mutate`` returned.
    :raises AgentLinkError: ``state_io_error`` when the file is unreadable, not JSON, not an
        object or its ``version`` is not 1 (nothing is written), or the lock times out.
    """
    path = table_path(state_dir)
    with locked(path, state_dir):
        raw = _read_raw(path, state_dir)
        if raw is _MISSING:
            raw = {"version": TABLE_VERSION}
        if not isinstance(raw, dict):
            raise io_error(path, state_dir, "EINVAL", f"{TABLE_FILE} does not hold a JSON object, so agent-link will not change it.")
        if raw.get("version") != TABLE_VERSION:
            raise io_error(path, state_dir, "unsupported_version",
                           f'{TABLE_FILE} has "version" {raw.get("version")!r}; agent-link only writes version {TABLE_VERSION}.',
                           "Another agent-link version wrote it: use that version, or move the file away to start a new table.")
        before = json.dumps(raw, sort_keys=True)
        result = mutate(raw)
        if json.dumps(raw, sort_keys=True) != before:  # a no-op leaves the user's formatting alone
            text = json.dumps(raw, indent=2, ensure_ascii=False) + "\n"
            atomic_write(path, text.encode("utf-8"), state_dir)
    return result


def owned_object(raw: dict[str, Any], key: str, path: Path, state_dir: Path) -> dict[str, Any]:
    """``raw[key]`` as a dict to edit, created when absent.

    :raises AgentLinkError: ``state_io_error`` when a hand edit made it something else:
        replacing it would throw away the user's entries.
    """
    value = raw.setdefault(key, {})
    if not isinstance(value, dict):
        raise io_error(path, state_dir, "EINVAL", f'"{key}" in {TABLE_FILE} is not an object; fix it by hand before changing it here.')
    return value
