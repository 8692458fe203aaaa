"""MCP tool records, argument validation (:func:`validate_arguments`) and the result contract
(:func:`call_tool`; docs/behaviour.md §3-4)."""

from __future__ import annotations

import contextvars
import hashlib
import inspect
import json
import logging
import os
import re
import sqlite3
import sys
from collections.abc import Awaitable, Callable, Collection, Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from typing import TYPE_CHECKING, Any

from agent_link_core.boundary import CORE_PLUGIN, MAX_RESULT_BYTES, Refused, disable_hint, oversize, plain
from agent_link_core.errors import AgentLinkError, invalid_arguments
from agent_link_core.json_files import ensure_private_dir
from agent_link_core.tools.schemas import BOOL, OBJ, PATTERN_WORDS, STR, ULID
from agent_link_core.model import Caller
from agent_link_core.visible import plain_json, visible_data

if TYPE_CHECKING:  # pragma: no cover  (jsonschema loads at the first call that validates, not for the CLI's commands)
    from jsonschema import Draft202012Validator

    from agent_link_core.app import App

log = logging.getLogger(__name__)
INT_RE = re.compile(r"^-?[0-9]+\Z")
TOOL_NAME_RE = re.compile(r"^[a-z][a-z0-9_]{0,63}\Z")
#: ``async (progress, total, message) -> None``: one MCP progress notification for the tool call being served (ms for waits)
Progress = Callable[[float, "float | None", "str | None"], Awaitable[None]]


#: a transport's mark that its client closed its input (the MCP stdio shutdown: it closes stdin, waits, then sends SIGTERM):
#: set to ``[False]`` in the context its items are sent from (the SDK runs a request's handler in it) and made ``[True]``
#: at the end of the input; a call still running then marks no mail read (:func:`client_gone`), as nobody may receive it
INPUT_ENDED: contextvars.ContextVar[list[bool] | None] = contextvars.ContextVar("agent_link_input_ended", default=None)
#: set by a transport that writes each answer itself to an empty list in the context of the request's handler: a read then
#: answers with what it shows unmarked and leaves here the marks (``() -> object``) it applies once the answer was written
AFTER_WRITE: contextvars.ContextVar[list[Callable[[], object]] | None] = contextvars.ContextVar("agent_link_after_write", default=None)


def client_gone() -> bool:
    """Whether the MCP client of the tool call running has gone (it closed its input, :data:`INPUT_ENDED`, or this process
    was re-parented since ``entry.PARENT_PID``), so the call marks no mail read or delivered. False outside an MCP server."""
    if (INPUT_ENDED.get() or [False])[0]:
        return True
    parent = getattr(sys.modules.get("agent_link_core.entry"), "PARENT_PID", None)
    return parent is not None and os.getppid() != parent


@dataclass
class ToolCall:
    """What a handler gets besides its arguments: the request's MCP ``_meta`` (may be empty), the ``caller`` resolved for
    it, ``warnings`` (append ``{"code", "message"}`` dicts to report with a success) and ``progress``, set only when the
    client sent a progress token (long waits use it to stay alive)."""

    meta: Mapping[str, Any]
    caller: Caller
    warnings: list[dict[str, Any]] = field(default_factory=list)
    progress: Progress | None = None


Handler = Callable[["App", dict[str, Any], ToolCall], Awaitable[dict[str, Any]]]


@dataclass(frozen=True)
class ToolSpec:
    """One MCP tool.

    :param name: the tool name (``snake_case``; unique across plugins).
    :param description: what it does and which channel it answers (models read it).
    :param input_schema: JSON schema of the arguments (``type: object``, ``additionalProperties: false``).
    :param output_fields: JSON schemas of the success fields (:func:`output_schema` adds ``ok``, ``error``, ``warnings``).
    :param handler: ``async (app, arguments, call) -> dict`` returning success fields; raises :class:`AgentLinkError` to fail.
    :param read_only / destructive / idempotent: MCP annotations.
    :param title: the human-readable name hosts show (MCP ``title``).
    :param removed: arguments removed in older versions ``{old: replacement}``.
    :param removed_forms: removed forms of a kept argument ``{argument: (JSON type of the form, what to give instead)}``,
        e.g. ``{"since": ("number", "an ISO 8601 string")}``: refused as a removed argument is.
    :param reaches_unlisted: it calls the tools a server leaves out of ``tools/list``; ``unknown_tool`` answers name it.
    """

    name: str
    description: str
    input_schema: dict[str, Any]
    output_fields: dict[str, Any]
    handler: Handler
    read_only: bool = False
    destructive: bool = False
    idempotent: bool = False
    removed: Mapping[str, str] = field(default_factory=dict)
    title: str | None = None
    removed_forms: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    reaches_unlisted: bool = False

    # the validators are made on first use (making one costs about as much as using it)
    @cached_property
    def input_validator(self) -> Draft202012Validator:
        """The validator of :attr:`input_schema` (:func:`validate_arguments`)."""
        return _validator_class()(self.input_schema)

    @cached_property
    def result_validator(self) -> Draft202012Validator:
        """The validator of :func:`output_schema` (:func:`call_tool`)."""
        return _validator_class()(output_schema(self))


@lru_cache(maxsize=1)
def _validator_class() -> Any:
    """Draft 2020-12 with ``pattern`` read as JSON Schema defines it, an ECMA-262 regular expression, whose ``$`` (no
    multiline flag) matches only at the end of the string; Python's ``$`` also matches before a final line break, so
    ``"all\\n"`` passed ``^(all|...)$``. Items needing only a type (a read's messages) are checked without a descent into each;
    a tuple is a JSON array (sent as one: a result the visible rule leaves as it is keeps its tuples)."""
    from jsonschema import Draft202012Validator, ValidationError, validators

    def pattern(validator: Any, regex: str, instance: Any, schema: Any) -> Iterator[ValidationError]:
        if validator.is_type(instance, "string") and not ecma_regex(regex).search(instance):
            yield ValidationError(f"{instance!r} does not match {regex!r}")

    def items(validator: Any, items: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
        if not (isinstance(items, dict) and items.keys() == {"type"} and isinstance(items["type"], str) and "prefixItems" not in schema
                and validator.is_type(instance, "array") and all(validator.is_type(item, items["type"]) for item in instance)):
            yield from Draft202012Validator.VALIDATORS["items"](validator, items, instance, schema)

    checker = Draft202012Validator.TYPE_CHECKER.redefine("array", lambda _, value: isinstance(value, (list, tuple)))
    return validators.extend(Draft202012Validator, {"pattern": pattern, "items": items}, type_checker=checker)


@lru_cache(maxsize=512)
def ecma_regex(regex: str) -> re.Pattern[str]:
    """``regex`` (a JSON schema ``pattern``) compiled for Python with each ``$`` outside a character class as ``\\Z``, the
    end of the string, as in ECMA-262. :raises re.error: not a regular expression."""
    # escapes and character classes are kept whole; a "$" left over is an anchor
    return re.compile(re.sub(r"(\\.|\[(?:\\.|[^\]\\])*\]|[^\\\[$]+)|\$", lambda m: m[1] or r"\Z", regex))


WARNING_SCHEMA = {"type": "object", "properties": {"code": STR, "message": STR, "details": OBJ}, "required": ["code", "message"]}
ERROR_SCHEMA = {"type": "object", "properties": {"code": STR, "message": STR, "details": OBJ, "hint": STR},
                "required": ["code", "message"], "additionalProperties": False}


def output_schema(spec: ToolSpec) -> dict[str, Any]:
    """The declared outputSchema: the success fields plus the shared ok/error/warnings."""
    properties = {"ok": BOOL, "error": ERROR_SCHEMA, "warnings": {"type": "array", "items": WARNING_SCHEMA}, **spec.output_fields}
    return {"type": "object", "properties": properties, "required": ["ok"], "additionalProperties": False}


def check_tool(record: Any) -> None:
    """Refuse a tool that is not a well-formed :class:`ToolSpec` (name, async handler, schemas valid JSON Schema).
    :raises Refused: naming what is wrong and how to fix it (``agent_link_register_tools``)."""
    from jsonschema.exceptions import SchemaError

    if not isinstance(record, ToolSpec):
        raise Refused(f"registered a {type(record).__name__}, not a ToolSpec", "Register agent_link_core.tools.registry.ToolSpec records.")
    if not isinstance(record.name, str) or not TOOL_NAME_RE.match(record.name):
        raise Refused(f"registered a tool named {record.name!r}", "Tool names are snake_case: a-z 0-9 _, starting with a letter, at most 64.")
    if not isinstance(record.description, str) or not record.description.strip():
        raise Refused(f"tool {record.name!r} has no description", "Describe what the tool does; models read it.")
    handler = record.handler
    if not callable(handler) or not (inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(type(handler).__call__)):
        raise Refused(f"tool {record.name!r} has a handler that is not an async function",
                      "The handler is `async def handler(app, arguments, call) -> dict`.")
    if not isinstance(record.input_schema, Mapping) or record.input_schema.get("type") != "object":
        raise Refused(f"tool {record.name!r} has an input schema that is not a JSON schema of type object",
                      "input_schema must be {'type': 'object', 'properties': {...}, 'additionalProperties': False}.")
    if not isinstance(record.output_fields, Mapping) or not all(isinstance(v, Mapping) for v in record.output_fields.values()):
        raise Refused(f"tool {record.name!r} has output_fields that are not a dict of JSON schemas",
                      "output_fields maps each success field to its JSON schema.")
    for which, schema in (("input", record.input_schema), ("output", output_schema(record))):
        try:
            check_schema(schema)
        except SchemaError as exc:
            where = "/".join(str(p) for p in exc.path) or "(root)"
            raise Refused(f"tool {record.name!r} has an invalid {which} schema at {where}: {exc.message[:200]}",
                          "Fix the schema (it is checked against JSON Schema draft 2020-12).") from None


_VALID_SCHEMAS: set[str] = set()  # keys (:func:`_schema_key`) of schemas found valid in this process
_READ_FILES: dict[str, set[str]] = {}  # the cache files read in this process, and their keys
#: a cache file holding more keys than this starts over (schemas that changed leave old keys)
MAX_REMEMBERED_SCHEMAS = 4096


def _schema_key(schema: Any) -> str | None:
    """SHA-256 of the exact JSON text (``1``, ``1.0``, ``true`` apart); None unless plain JSON (a tuple is no array to the meta-schema)."""
    def plain(value: Any) -> bool:
        if type(value) is dict:
            return all(type(k) is str and plain(v) for k, v in value.items())
        if type(value) is list:
            return all(plain(v) for v in value)
        return value is None or type(value) in (str, int, float, bool)

    try:
        return hashlib.sha256(json.dumps(schema, sort_keys=True).encode()).hexdigest() if plain(schema) else None
    except (RecursionError, ValueError):
        return None


def _remembered_path() -> str | None:
    """``$XDG_CACHE_HOME/agent-link/valid-schemas/<key>``, one file per installed jsonschema."""
    from jsonschema import validators

    try:
        code = os.stat(validators.__file__ or "")
    except OSError:
        return None
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    key = hashlib.sha256(f"{validators.__file__}\0{code.st_mtime_ns}".encode("utf-8", "surrogateescape")).hexdigest()[:16]
    return os.path.join(base, "agent-link", "valid-schemas", key)


def check_schema(schema: Any) -> None:
    """``Draft202012Validator.check_schema(schema)`` (a JSON object as dicts and lists), remembering the valid ones (for the
    process and in :func:`_remembered_path`): every process that lists the tools checks the same ~90, ~0.5 s of CPU.
    :raises jsonschema.exceptions.SchemaError: the schema is invalid."""
    from jsonschema import Draft202012Validator

    key = _schema_key(schema)
    path = _remembered_path() if key is not None and key not in _VALID_SCHEMAS else None
    if path is not None and path not in _READ_FILES:
        try:
            with open(path, encoding="ascii", errors="replace") as f:
                _READ_FILES[path] = set(f.read().split())
        except OSError:
            _READ_FILES[path] = set()
        _VALID_SCHEMAS.update(_READ_FILES[path])
    if key in _VALID_SCHEMAS:
        return
    Draft202012Validator.check_schema(schema)
    if key is None:
        return
    _VALID_SCHEMAS.add(key)
    if path is not None:
        try:
            ensure_private_dir(os.path.dirname(path))
            # O_APPEND: the lines of processes appending at once stay whole
            start_over = len(_READ_FILES[path]) >= MAX_REMEMBERED_SCHEMAS
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | (os.O_TRUNC if start_over else os.O_APPEND), 0o600)
            try:
                os.write(fd, (key + "\n").encode("ascii"))
            finally:
                os.close(fd)
            if start_over:
                _READ_FILES[path] = {key}
        except (OSError, AgentLinkError):
            pass


def _types(schema: Mapping[str, Any]) -> set[str]:
    t = schema.get("type")
    if isinstance(t, list):
        return set(t)
    return {t} if isinstance(t, str) else set()


def _expected(schema: Mapping[str, Any]) -> str:
    if "enum" in schema:
        return " | ".join(str(v) for v in schema["enum"])
    if isinstance(schema.get("anyOf"), list):
        return ", or ".join(_expected(alt) for alt in schema["anyOf"] if isinstance(alt, Mapping))
    parts = [" or ".join(sorted(_types(schema)) or ["value"])]
    if "minimum" in schema or "maximum" in schema:
        parts.append(f"in [{schema.get('minimum', '-inf')}, {schema.get('maximum', 'inf')}]")
    if schema.get("minLength") == 1:
        if schema.get("pattern") not in PATTERN_WORDS:  # a known pattern's words say what it holds
            parts.insert(0, "non-empty")
    elif "minLength" in schema:
        parts.append(f"at least {schema['minLength']} characters")
    if "maxLength" in schema:
        parts.append(f"at most {schema['maxLength']} characters")
    pattern = schema.get("pattern")
    if pattern in PATTERN_WORDS:
        return PATTERN_WORDS[pattern] if parts == ["string"] else " ".join([*parts, PATTERN_WORDS[pattern]])
    if pattern is not None:  # a plugin's own pattern: its description says it in words
        said = str(schema.get("description") or "").strip().rstrip(".")
        parts.append(f"({said})" if said else "in the form the tool's description gives")
    return " ".join(parts)


def validate_arguments(spec: ToolSpec, arguments: Mapping[str, Any] | None) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Check and normalise tool arguments: ``(arguments, warnings)``, nulls of optional arguments removed, exact string
    spellings of numbers and booleans converted (with a ``coerced_argument`` warning).
    :raises AgentLinkError: ``invalid_arguments``, ``details.errors`` ``[{path, rule, expected}]`` (``details.removed``)."""
    from jsonschema import Draft202012Validator

    arguments = {} if arguments is None else arguments
    if not isinstance(arguments, Mapping):
        raise invalid_arguments([{"path": "", "rule": "type", "expected": "an object"}])
    schema = spec.input_schema
    props: Mapping[str, Any] = schema.get("properties", {})
    required = set(schema.get("required", ()))
    args: dict[str, Any] = {}
    warnings: list[dict[str, Any]] = []
    errors: list[dict[str, Any]] = []
    removed: list[dict[str, str]] = []
    for key, value in arguments.items():
        if key in spec.removed and key not in props:
            removed.append({"argument": key, "replacement": spec.removed[key]})
            errors.append({"path": key, "rule": "removed", "expected": f"use {spec.removed[key]} instead"})
            continue
        if key in spec.removed_forms and Draft202012Validator.TYPE_CHECKER.is_type(value, spec.removed_forms[key][0]):
            instead = spec.removed_forms[key][1]
            removed.append({"argument": key, "replacement": instead, "form": spec.removed_forms[key][0]})
            errors.append({"path": key, "rule": "removed", "expected": instead})
            continue
        if value is None:
            if key in required:
                errors.append({"path": key, "rule": "required", "expected": _expected(props.get(key, {}))})
            continue
        prop = props.get(key)
        if prop is not None and isinstance(value, str) and prop.get("pattern") == ULID["pattern"]:
            value = _message_id(value)
        if prop is not None and isinstance(value, str):
            types = _types(prop)
            if "integer" in types and "string" not in types and INT_RE.match(value):
                value = int(value)
                warnings.append(_coerced(key, "integer"))
            elif "boolean" in types and "string" not in types and value in ("true", "false"):
                value = value == "true"
                warnings.append(_coerced(key, "boolean"))
        args[key] = value
    for err in sorted(spec.input_validator.iter_errors(args), key=lambda e: list(e.absolute_path)):
        if err.validator == "additionalProperties":
            for extra in sorted(set(args) - set(props)):
                errors.append({"path": extra, "rule": "unknown_property", "expected": "no such argument"})
            continue
        if err.validator == "required":
            for name in (n for n in err.validator_value if n not in err.instance):
                errors.append({"path": name, "rule": "required", "expected": _expected(props.get(name, {}))})
            continue
        path = ".".join(str(p) for p in err.absolute_path)
        errors.append({"path": path, "rule": str(err.validator), "expected": _expected(err.schema if isinstance(err.schema, dict) else {})})
    if errors:
        # once each: a null required argument is reported by the loop and again by the schema
        unique: dict[tuple[str, str], dict[str, Any]] = {}
        for error in errors:
            unique.setdefault((error["path"], error["rule"]), error)
        errors = list(unique.values())
        more: dict[str, Any] = {"removed": removed} if removed else {}
        exc = invalid_arguments(errors, **more)
        if removed:
            exc.hint = "; ".join(f"{r['argument']} as {_a(r['form'])} was removed: give {r['replacement']}" if "form" in r
                                 else f"{r['argument']} was replaced by {r['replacement']}" for r in removed)
        raise exc
    return {key: _whole(props.get(key, {}), value) for key, value in args.items()}, warnings


def _whole(schema: Mapping[str, Any], value: Any) -> Any:
    """``value`` with every whole-number float (``2.0``) the schema types ``integer`` made an ``int``, nested ones too."""
    if isinstance(value, float):
        alternatives = [a for a in (schema, *schema.get("anyOf", ()), *schema.get("oneOf", ())) if isinstance(a, Mapping)]
        return int(value) if value.is_integer() and any("integer" in _types(a) for a in alternatives) else value
    if isinstance(value, dict):
        props, extra = schema.get("properties", {}), schema.get("additionalProperties")
        return {k: _whole(props.get(k, extra if isinstance(extra, Mapping) else {}), v) for k, v in value.items()}
    if isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        return [_whole(schema["items"], v) for v in value]
    return value


def _message_id(value: str) -> str:
    """A message-id argument as stored: a UUID becomes the ULID of the same 128 bits (as the CLI maps it)."""
    from agent_link_core.mailbox import ulid_of_uuid

    if len(value) == 26 or not re.fullmatch(ULID["pattern"], value):  # a ULID, or what the schema refuses
        return value
    return ulid_of_uuid(value) or value


def _a(noun: str) -> str:
    return f"{'an' if noun[:1].lower() in 'aeiou' else 'a'} {noun}"


def _coerced(key: str, kind: str) -> dict[str, Any]:
    return {"code": "coerced_argument", "message": f"{key} was given as a string and read as {_a(kind)}.", "details": {"argument": key}}


async def run_tool(app: App, spec: ToolSpec, arguments: Mapping[str, Any] | None, meta: Mapping[str, Any],
                   progress: Progress | None = None) -> dict[str, Any]:
    """:func:`call_tool`'s result, without its JSON text."""
    return (await call_tool(app, spec, arguments, meta, progress))[0]


async def call_tool(app: App, spec: ToolSpec, arguments: Mapping[str, Any] | None, meta: Mapping[str, Any],
                    progress: Progress | None = None) -> tuple[dict[str, Any], str | None]:
    """Validate, call the handler and wrap the outcome in the result contract (docs/behaviour.md §3-4).

    :param progress: the call's progress reporter when the client sent a progress token.
    :returns: ``(result, its JSON text or None)``, its strings made visible (:mod:`agent_link_core.visible`). Never raises:
        an :class:`AgentLinkError` becomes ``ok: false``, anything else or a result its output schema refuses
        ``internal_error`` (:func:`_withheld`).
    """
    plugin = app.hooks.owner("tool", spec.name) or "?"
    try:
        if plugin in app.hooks.boundary.disabled:  # left out while this server runs: say so, never KeyError
            raise AgentLinkError("unsupported", f"{spec.name} belongs to the plugin {plugin}, which was disabled: "
                                 f"{app.hooks.boundary.disabled[plugin]}"[:500], {"capability": spec.name, "plugin": plugin},
                                 hint="agent_link_health lists it under plugins.problems; the other tools still work.")
        if isinstance(arguments, Mapping):  # (validation refuses what is not an object)
            # arguments a harness declares as naming the caller (Harness.caller_arguments, added by the host, not the
            # model) go to identify_caller's meta; the declarations name them, so no host's harness is built to learn them
            keys = {key for entry in app.harnesses.declared().values() for key in entry.caller_arguments}
            if found := {key: arguments[key] for key in keys & arguments.keys()}:
                arguments, meta = {k: v for k, v in arguments.items() if k not in found}, {**meta, **found}
        args, warnings = validate_arguments(spec, arguments)
        call = ToolCall(meta=meta, caller=app.caller(meta), warnings=warnings, progress=progress)
        # through the boundary's guard: what the plugin raises (SystemExit, a KeyboardInterrupt not from Ctrl-C ...) is this call's error
        fields = await app.hooks.boundary.acall(plugin, f"tool {spec.name}", lambda: spec.handler(app, args, call),
                                                bound_s=None, default=_FAULTED,
                                                passing=(AgentLinkError, sqlite3.DatabaseError))
        if fields is _FAULTED:  # said with what the guard recorded: a hang skips the tool for a while, which says so
            problem = app.hooks.boundary.problem_of(plugin, f"tool {spec.name}")
            said = f"failed: {problem.error}"[:400] if problem is not None else "failed unexpectedly"
            raise AgentLinkError("internal_error", f"{spec.name} (plugin {plugin}) {said}.", {"cause": "plugin_fault", "plugin": plugin},
                                 hint=f"agent_link_health lists the failure under plugins.problems. {disable_hint(plugin)}")
    except AgentLinkError as exc:
        return {"ok": False, "error": visible_data(exc.to_dict())}, None
    except sqlite3.DatabaseError as exc:
        error = app.store.failure(exc)  # records corruption, so every process stops writing
        if error.code != "state_busy":
            log.warning("tool %s: %s", spec.name, error.message)
        return {"ok": False, "error": visible_data(error.to_dict())}, None
    except Exception as exc:  # the contract promises a result object, never a crash
        log.exception("tool %s failed", spec.name)
        return {"ok": False, "error": {"code": "internal_error", "message": f"{spec.name} failed unexpectedly.",
                                        "details": {"cause": type(exc).__name__},
                                        "hint": "This is a bug in agent-link or a plugin; the server's log (stderr) has the traceback."}}, None
    if type(fields) is not dict or (plugin != CORE_PLUGIN and not plain(fields)):  # a plugin's handler broke its contract
        return _withheld(app, spec, plugin, [{"path": "", "rule": "type"}]), None
    extra = [k for k in fields if k not in spec.output_fields and k != "warnings"]
    if extra:  # the output schema is closed: an undeclared field would break strict clients
        log.warning("tool %s dropped undeclared result fields %s", spec.name, extra)
    result = {"ok": True, **{k: v for k, v in fields.items() if k not in extra}}
    handed = result.pop("warnings", [])
    all_warnings = list(call.warnings) + (list(handed) if isinstance(handed, list) else [handed])  # a bad one fails the schema
    if all_warnings:
        result["warnings"] = all_warnings
    # strings from agents and hosts reach the model here (agent_link_core.visible); a result the rule leaves as it is
    # (most) is serialised once, for its size and the answer
    text = plain_json(result)
    too_big = oversize(fields, MAX_RESULT_BYTES) if text is None else oversize(result, MAX_RESULT_BYTES, text)
    if too_big is not None:  # checked before the schema: validating 20 MB would hold the server
        return _withheld(app, spec, plugin, [{"path": "", "rule": "maxBytes"}], too_big), None
    if text is None:
        result = visible_data(result)
    errors = sorted(spec.result_validator.iter_errors(result), key=lambda e: [str(p) for p in e.absolute_path])
    if errors:  # named by path and rule, without values: a result may hold mail
        broken = dict.fromkeys((".".join(str(p) for p in e.absolute_path), str(e.validator)) for e in errors)  # each once
        return _withheld(app, spec, plugin, [{"path": path, "rule": rule} for path, rule in list(broken)[:MAX_RESULT_ERRORS]]), None
    return result, text


_FAULTED = object()  # a handler's answer when the boundary contained its fault
MAX_RESULT_ERRORS = 5  # how many schema violations an internal_error names


def _withheld(app: App, spec: ToolSpec, plugin: str, found: list[dict[str, str]], why: str | None = None) -> dict[str, Any]:
    """The ``internal_error`` for ``plugin``'s result that broke its output schema at ``found`` (or ``why``), recorded as
    the plugin's problem."""
    where = "; ".join(f"{f['path'] or '(result)'}: {f['rule']}" for f in found)
    log.warning("tool %s of plugin %s returned a result its output schema refuses: %s", spec.name, plugin, where)
    app.hooks.boundary.fault(plugin, f"tool {spec.name}", why or f"result does not match the declared output schema ({where})"[:300],
                             fix="Return the fields the tool declares, with the declared types, at most 1 MiB.")
    return visible_data({"ok": False, "error": {
        "code": "internal_error",
        "message": f"{spec.name} (plugin {plugin}) returned a result that does not match its declared output schema; it was withheld.",
        "details": {"cause": "output_schema", "plugin": plugin, "errors": found},
        "hint": f"This is a bug in the plugin {plugin}; agent_link_health lists it under plugins.problems.",
    }})


def unknown_tool(name: str, listed: Mapping[str, ToolSpec], registered: Collection[str]) -> dict[str, Any]:
    """The result for calling tool ``name`` that this server does not list: nobody registered it, or it is among the
    ``registered`` tools that the ``listed`` ones leave out (``agent_link_listed_tools``), which the answer says, naming
    a listed tool that reaches it (:attr:`ToolSpec.reaches_unlisted`)."""
    if name not in registered or name in listed:
        return {"ok": False, "error": AgentLinkError("unknown_tool", f"There is no tool named {name!r}.", {"name": name},
                                                     hint="tools/list names the tools this server offers.").to_dict()}
    gateway = next((spec.name for spec in listed.values() if spec.reaches_unlisted), None)
    reach = f"call it through {gateway}" if gateway else "tools/list names those it offers"
    return {"ok": False, "error": AgentLinkError("unknown_tool", f"{name!r} is installed but this server does not offer it.",
                                                 {"name": name, "listed": False}, hint=f"This server's tool list leaves it out; {reach}.").to_dict()}
