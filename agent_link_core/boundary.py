"""The plugin boundary: what keeps one plugin's bug away from everything else.

Every hook implementation is wrapped once, when its plugin is registered
(:func:`guard_plugin`), so pluggy still orders and calls it (``tryfirst``, ``trylast``,
wrappers, ``firstresult``) while the core learns about each implementation's failure
separately:

* an exception (other than a documented refusal, :class:`~agent_link_core.errors.AgentLinkError`
  from ``resolve_*``, ``before_*`` and ``check_*`` hooks) or a result of the wrong type is
  recorded as a :class:`Problem` naming the plugin and the hook, and the implementation
  counts as having answered ``None``;
* a hook call runs in a worker thread with a time budget (``AGENT_LINK_HOOK_TIMEOUT_MS``);
  the plugin whose implementation is still running when the budget is spent is disabled,
  and the call is replayed without it (implementations that already answered are not run
  again: their answers are kept).

Records a plugin contributes through ``register`` callbacks are checked here too
(:func:`check_record`). Messages always say which plugin, which hook, and how to get rid of
it (``AGENT_LINK_DISABLE_PLUGINS=<name>``).
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import json
import logging
import queue
import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from agent_link_core.errors import AgentLinkError

log = logging.getLogger("agent_link_core.plugins")

#: Hooks whose implementations may refuse by raising AgentLinkError (documented in hookspecs).
REFUSING_HOOKS = frozenset({"agent_link_resolve_address", "agent_link_before_send", "agent_link_check_override"})
#: Hooks whose failures disable the plugin: a plugin that cannot register cleanly is left out whole.
REGISTRATION_HOOKS = frozenset({
    "agent_link_register_harnesses", "agent_link_register_tools", "agent_link_register_settings",
    "agent_link_register_commands", "agent_link_schema", "agent_link_register_prompt_hooks",
    "agent_link_register_panels", "agent_link_register_legacy_importers",
})
#: Hooks whose implementations may answer with an awaitable (for I/O); the core awaits it on
#: the caller's event loop, so the loop is never blocked while the plugin waits.
AWAITABLE_HOOKS = frozenset({"agent_link_resolve_address", "agent_link_push_reminders"})
DEFAULT_TIMEOUT_MS = 30_000
TIMEOUT_ENV = "AGENT_LINK_HOOK_TIMEOUT_MS"
CORE_PLUGIN = "agent_link_core.default_plugins"

HARNESS_NAME_RE = re.compile(r"^[a-z][a-z0-9-]{0,31}$")
TOOL_NAME_RE = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
SETTING_NAME_RE = re.compile(r"^AGENT_LINK_[A-Z0-9_]{1,64}$")
OPTION_NAME_RE = re.compile(r"^[a-z][A-Za-z0-9]{0,63}$")
ALIAS_NAME_RE = re.compile(r"^[A-Z][A-Z0-9_]{0,80}$")
ENVELOPE_ATTRIBUTES = frozenset({"via", "procedure"})


def disable_hint(plugin: str) -> str:
    """The one-line way out for a broken plugin."""
    return f"Fix or update the plugin, or turn it off with AGENT_LINK_DISABLE_PLUGINS={plugin}."


@dataclass
class Problem:
    """One failure of one plugin, as ``agent-link plugins`` and health report it.

    :param plugin: the plugin's name (its entry point name).
    :param hook: the hook (``agent_link_*``), a harness method (``harness.<name>.<method>``)
        or ``load`` (import and registration).
    :param error: what went wrong, one line.
    :param fix: what to do about it (always names ``AGENT_LINK_DISABLE_PLUGINS=<plugin>``).
    :param disabled: True when the plugin was left out for the rest of the process.
    :param count: how many times it happened in this process.
    """

    plugin: str
    hook: str
    error: str
    fix: str
    disabled: bool = False
    count: int = 1

    def to_dict(self) -> dict[str, Any]:
        """JSON form for health and ``agent-link plugins --json``."""
        return {"plugin": self.plugin, "hook": self.hook, "error": self.error, "fix": self.fix,
                "disabled": self.disabled, "count": self.count}

    def line(self) -> str:
        """One line for people: plugin, hook, error and the way out."""
        state = "disabled" if self.disabled else f"{self.count}x"
        return f"{self.plugin}: {self.hook}: {self.error} ({state}). {self.fix}"


class Refused(Exception):
    """A contribution the core refuses (raised by a ``register`` callback once the refusal is
    recorded, so a plugin that swallows it is still left out)."""

    def __init__(self, message: str, fix: str = "") -> None:
        super().__init__(message)
        self.fix = fix


class HookTimeout(Exception):
    """A hook call did not return within its budget."""


def describe(exc: BaseException) -> str:
    """``Type: message`` cut to 300 characters (no traceback: that goes to the log)."""
    text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return text[:300]


# -- per-call state ------------------------------------------------------------------


@dataclass
class CallState:
    """What one facade call knows while pluggy runs it (shared with its worker thread).

    :param done: answers of implementations that returned, by ``id(HookImpl)``; a replay
        after a hang returns these instead of running them again.
    :param running: ``(plugin, hook)`` of the implementation running now (blamed on a hang).
    :param faulted: plugins that failed during this call.
    :param register: the ``register`` callback's checker for registration hooks.
    """

    hook: str
    done: dict[int, Any] = field(default_factory=dict)
    running: tuple[str, str] | None = None
    faulted: set[str] = field(default_factory=set)
    register: Callable[[str, Any], None] | None = None


_CALL: contextvars.ContextVar[CallState | None] = contextvars.ContextVar("agent_link_hook_call", default=None)
_PLUGIN: contextvars.ContextVar[str | None] = contextvars.ContextVar("agent_link_hook_plugin", default=None)


def current_plugin() -> str | None:
    """The plugin whose hook implementation is running in this context, if any."""
    return _PLUGIN.get()


# -- result checks ---------------------------------------------------------------------


def _check_migrations(result: Any, plugin: str) -> str | None:
    from agent_link_core.store import Migration

    if not isinstance(result, (list, tuple)):
        return f"returned {type(result).__name__}; expected a list of Migration"
    for m in result:
        if not isinstance(m, Migration):
            return f"returned a {type(m).__name__} in its list; expected Migration records"
        owner_ok = m.owner == plugin or plugin == CORE_PLUGIN  # the core's modules own theirs
        if not owner_ok:
            return f"returned a migration owned by {m.owner!r}; a plugin's migrations must be owned by its own name {plugin!r}"
        if not isinstance(m.version, int) or isinstance(m.version, bool) or m.version < 1:
            return f"returned migration {m.owner}#{m.version!r}; versions are integers from 1"
        if not isinstance(m.sql, str) or not m.sql.strip():
            return f"returned migration {m.owner}#{m.version} without SQL"
    return None


def _check_resolution(result: Any, plugin: str) -> str | None:
    from agent_link_core.addresses import is_address

    if not isinstance(result, Mapping):
        return f"returned {type(result).__name__}; expected None or a dict with 'address'"
    if not isinstance(result.get("address"), str) or not is_address(result["address"]):
        return "returned a resolution whose 'address' is not an address <harness>:<id>"
    if result.get("via") is not None and not isinstance(result["via"], str):
        return "returned a resolution whose 'via' is not a string"
    if result.get("metadata") is not None and not isinstance(result["metadata"], Mapping):
        return "returned a resolution whose 'metadata' is not a dict"
    return None


def _check_warnings(result: Any, plugin: str) -> str | None:
    if not isinstance(result, (list, tuple)):
        return f"returned {type(result).__name__}; expected None or a list of warnings"
    for w in result:
        if not isinstance(w, Mapping) or not isinstance(w.get("code"), str) or not isinstance(w.get("message"), str):
            return "returned a warning that is not {'code': str, 'message': str}"
    return None


def _check_contribution(result: Any, plugin: str) -> str | None:
    from agent_link_core.records import EnvelopeContribution

    if not isinstance(result, EnvelopeContribution):
        return f"returned {type(result).__name__}; expected None or an EnvelopeContribution"
    if not isinstance(result.attributes, Mapping) or not isinstance(result.elements, (list, tuple)):
        return "returned an EnvelopeContribution whose attributes are not a dict or whose elements are not a list"
    for key, value in result.attributes.items():
        if key not in ENVELOPE_ATTRIBUTES or not isinstance(value, str):
            return f"returned envelope attribute {key!r}; only 'via' and 'procedure' (strings) are rendered"
    for element in result.elements:
        if not isinstance(element, str) or not element.startswith("<") or "agent-link-message" in element:
            return "returned an envelope element that is not one element rendered with envelope.render_element"
    return None


def _check_health(result: Any, plugin: str) -> str | None:
    if not isinstance(result, (tuple, list)) or len(result) != 2:
        return f"returned {type(result).__name__}; expected None or (section name, dict)"
    name, section = result
    if not isinstance(name, str) or not name or not isinstance(section, Mapping):
        return "returned a health section that is not (non-empty str, dict)"
    try:
        json.dumps(section)
    except (TypeError, ValueError) as exc:
        return f"returned a health section that is not JSON-serialisable ({describe(exc)})"
    return None


def _check_override(result: Any, plugin: str) -> str | None:
    if not isinstance(result, Mapping) or not isinstance(result.get("allowed"), bool):
        return f"returned {type(result).__name__}; expected None or a dict with a boolean 'allowed'"
    return None


def _check_nothing(result: Any, plugin: str) -> str | None:
    return f"returned {type(result).__name__}; this hook returns nothing (call register(...) instead)"


def _check_tasks(result: Any, plugin: str) -> str | None:
    if not isinstance(result, (list, tuple)) or not all(callable(t) for t in result):
        return f"returned {type(result).__name__}; expected None or a list of coroutine functions"
    return None


def _check_pushed(result: Any, plugin: str) -> str | None:
    if not isinstance(result, bool):
        return f"returned {type(result).__name__}; expected None, True/False or an awaitable of it"
    return None


def _check_roles(result: Any, plugin: str) -> str | None:
    if isinstance(result, dict) and all(isinstance(k, str) and isinstance(v, list) and all(isinstance(n, str) for n in v)
                                        for k, v in result.items()):
        return None
    return f"returned {type(result).__name__}; expected {{address: [role name, ...]}}"


def _check_observer(result: Any, plugin: str) -> str | None:
    return f"returned {type(result).__name__}; observers return nothing"


#: How each hook's non-None answer is checked; a hook absent here may return anything.
RESULT_CHECKS: dict[str, Callable[[Any, str], str | None]] = {
    "agent_link_register_harnesses": _check_nothing,
    "agent_link_register_tools": _check_nothing,
    "agent_link_register_settings": _check_nothing,
    "agent_link_register_commands": _check_nothing,
    "agent_link_schema": _check_migrations,
    "agent_link_resolve_address": _check_resolution,
    "agent_link_before_send": _check_warnings,
    "agent_link_render_envelope": _check_contribution,
    "agent_link_health": _check_health,
    "agent_link_check_override": _check_override,
    "agent_link_on_event": _check_observer,
    "agent_link_register_prompt_hooks": _check_nothing,
    "agent_link_register_panels": _check_nothing,
    "agent_link_register_legacy_importers": _check_nothing,
    "agent_link_push_reminders": _check_pushed,
    "agent_link_server_tasks": _check_tasks,
    "agent_link_session_roles": _check_roles,
}


# -- record checks (register callbacks) -------------------------------------------------


def check_harness(record: Any) -> None:
    """Refuse a harness that is not a :class:`~agent_link_core.harness.Harness` with a valid name."""
    from agent_link_core.harness import Harness

    if not isinstance(record, Harness):
        raise Refused(f"registered a {type(record).__name__}, not a Harness", "Subclass agent_link_core.harness.Harness.")
    name = getattr(record, "name", None)
    if not isinstance(name, str) or not HARNESS_NAME_RE.match(name):
        raise Refused(f"registered a harness named {name!r}",
                      "A harness name is its address scheme: 1-32 of a-z 0-9 -, starting with a letter.")
    options: Any = getattr(record, "send_options", frozenset())
    if not isinstance(options, (set, frozenset)) or not all(isinstance(o, str) for o in options):
        raise Refused(f"harness {name!r} declares send_options that are not a set of strings",
                      "Set send_options = frozenset({'option', ...}).")


def check_send_declarations(harness: Any) -> None:
    """A harness's declared send options and result fields: names and JSON schemas.

    Checked when the tools are collected (``Hooks.tools``: the MCP server, ``agent-link
    plugins``, health), where they become part of ``message_agent``: a CLI command that lists
    no tools does not load jsonschema for them.

    :raises Refused: a declaration of the wrong type, a name the core uses, an invalid schema.
    """
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError

    from agent_link_core.harness import SendOption
    from agent_link_core.tools.core_tools import CORE_TOOLS

    base = next(spec for spec in CORE_TOOLS if spec.name == "message_agent")
    specs = getattr(harness, "send_option_specs", ())
    fields = getattr(harness, "send_result_fields", {})
    if not isinstance(specs, (tuple, list)) or not isinstance(fields, Mapping):
        raise Refused(f"harness {harness.name!r} declares send_option_specs or send_result_fields of the wrong type",
                      "send_option_specs is a tuple of SendOption; send_result_fields a dict of JSON schemas.")
    named: list[tuple[str, Any]] = []
    for option in specs:
        if not isinstance(option, SendOption) or not isinstance(option.name, str) or not OPTION_NAME_RE.match(option.name):
            raise Refused(f"harness {harness.name!r} declares a send option that is not a SendOption with a camelCase name",
                          "Declare SendOption('name', {json schema}).")
        if option.name in base.input_schema["properties"]:
            raise Refused(f"harness {harness.name!r} declares send option {option.name!r}, which is message_agent's own argument",
                          "Name the option something of your own.")
        named.append((f"send option {option.name!r}", option.schema))
    for field_name, schema in fields.items():
        if field_name in base.output_fields or field_name in ("ok", "error", "warnings"):
            raise Refused(f"harness {harness.name!r} declares result field {field_name!r}, which the core declares already",
                          "Name the field something of your own.")
        named.append((f"result field {field_name!r}", schema))
    for what, schema in named:
        try:
            if not isinstance(schema, Mapping):
                raise SchemaError("not an object")
            Draft202012Validator.check_schema(schema)
        except SchemaError as exc:
            raise Refused(f"harness {harness.name!r} declares {what} with an invalid JSON schema: {exc.message[:200]}",
                          "Fix the schema (JSON Schema draft 2020-12).") from None


def check_prompt_hook(record: Any) -> None:
    """Refuse a prompt-hook record that is not a :class:`~agent_link_core.records.PromptHook`
    with a harness name and a dotted module path."""
    from agent_link_core.prompt_hooks import HARNESS_RE, MODULE_RE
    from agent_link_core.records import PromptHook

    if not isinstance(record, PromptHook):
        raise Refused(f"registered a {type(record).__name__}, not a PromptHook", "Register agent_link_core.records.PromptHook records.")
    if not isinstance(record.harness, str) or not HARNESS_RE.match(record.harness):
        raise Refused(f"registered a prompt hook for harness {record.harness!r}",
                      "The harness is a harness name: 1-32 of a-z 0-9 -, starting with a letter.")
    if not isinstance(record.module, str) or not MODULE_RE.match(record.module):
        raise Refused(f"registered a prompt hook with module {record.module!r}", "The module is a dotted module path.")


def check_panel(record: Any) -> None:
    """Refuse a panel that is not a :class:`~agent_link_core.panels.Panel` with a title and a
    callable ``render``."""
    from agent_link_core.panels import PANEL_NAME_RE, Panel

    if not isinstance(record, Panel):
        raise Refused(f"registered a {type(record).__name__}, not a Panel", "Register agent_link_core.panels.Panel records.")
    if not isinstance(record.name, str) or not PANEL_NAME_RE.match(record.name):
        raise Refused(f"registered a panel named {record.name!r}", "Panel names are a-z 0-9 -, starting with a letter, at most 48.")
    if not isinstance(record.title, str) or not record.title.strip() or not callable(record.render):
        raise Refused(f"panel {record.name!r} has no title or a render that is not callable",
                      "A panel has a title and render(app) -> PanelView.")


def check_legacy_importer(record: Any) -> None:
    """Refuse a legacy importer that is not a :class:`~agent_link_core.legacy.LegacyImporter`
    with a lower-case name and an integer order."""
    from agent_link_core.legacy import LegacyImporter

    if not isinstance(record, LegacyImporter):
        raise Refused(f"registered a {type(record).__name__}, not a LegacyImporter",
                      "Subclass agent_link_core.legacy.LegacyImporter.")
    if not isinstance(record.name, str) or not HARNESS_NAME_RE.match(record.name):
        raise Refused(f"registered a legacy importer named {record.name!r}",
                      "Importer names are 1-32 of a-z 0-9 -, starting with a letter.")
    if not isinstance(record.order, int) or isinstance(record.order, bool):
        raise Refused(f"legacy importer {record.name!r} has order {record.order!r}", "The order is an integer.")


def check_tool(record: Any) -> None:
    """Refuse a tool that is not a well-formed :class:`~agent_link_core.tools.registry.ToolSpec`
    (name, async handler, input and output schemas valid against the JSON Schema meta-schema)."""
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError

    from agent_link_core.tools.registry import ToolSpec, output_schema

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
            Draft202012Validator.check_schema(schema)
        except SchemaError as exc:
            where = "/".join(str(p) for p in exc.path) or "(root)"
            raise Refused(f"tool {record.name!r} has an invalid {which} schema at {where}: {exc.message[:200]}",
                          "Fix the schema (it is checked against JSON Schema draft 2020-12).") from None


def check_setting(record: Any, core_names: frozenset[str]) -> None:
    """Refuse a setting that is not a :class:`~agent_link_core.config.Setting`, is badly named,
    or would shadow one of the core's settings (its name or an alias)."""
    from agent_link_core.config import Setting

    if not isinstance(record, Setting):
        raise Refused(f"registered a {type(record).__name__}, not a Setting", "Register agent_link_core.config.Setting records.")
    if not isinstance(record.name, str) or not SETTING_NAME_RE.match(record.name):
        raise Refused(f"registered a setting named {record.name!r}", "Setting names are AGENT_LINK_ followed by A-Z 0-9 _.")
    if record.name in core_names:
        raise Refused(f"registered {record.name}, which is the core's own setting",
                      "A plugin cannot redefine a core setting; name yours AGENT_LINK_<PLUGIN>_...")
    for alias in record.aliases:
        if not isinstance(alias, str) or not ALIAS_NAME_RE.match(alias):
            raise Refused(f"setting {record.name} has an alias {alias!r} that is not an environment variable name",
                          "Aliases are upper-case variable names.")
        if alias in core_names:
            raise Refused(f"setting {record.name} takes {alias} as an alias, which is the core's own setting",
                          "A plugin cannot read a core setting as its own.")


# -- guards ------------------------------------------------------------------------------


class Boundary:
    """The fault bookkeeping and the bounded runner shared by one plugin manager's hooks.

    :param timeout_ms: the budget of one hook call (0: run inline, unbounded).
    :param on_disable: called with ``(plugin, reason)`` when a plugin must be left out.
    """

    def __init__(self, timeout_ms: int = DEFAULT_TIMEOUT_MS) -> None:
        self.timeout_ms = timeout_ms
        self.problems: dict[tuple[str, str, str], Problem] = {}
        self.disabled: dict[str, str] = {}
        self.on_disable: Callable[[str, str], None] | None = None
        #: told of each new problem (the App keeps them for other processes to see)
        self.sink: Callable[[dict[str, Any]], None] | None = None
        self._idle: list[_Worker] = []
        self._lock = threading.Lock()

    # -- bookkeeping

    def fault(self, plugin: str, hook: str, error: str, *, fix: str = "", disable: bool = False,
              exc: BaseException | None = None) -> Problem:
        """Record a failure of ``plugin`` in ``hook`` and log it (once per kind, then counted)."""
        if plugin == CORE_PLUGIN:  # the core is never left out: its failure is a bug to report
            disable = False
        fix = f"{fix} {disable_hint(plugin)}".strip()
        key = (plugin, hook, error)
        problem = self.problems.get(key)
        if problem is not None:
            problem.count += 1
            problem.disabled = problem.disabled or disable
        else:
            problem = self.problems[key] = Problem(plugin, hook, error, fix, disable)
            verb = "is disabled" if disable else "was skipped"
            log.warning("agent-link plugin %r failed in %s: %s; it %s. %s", plugin, hook, error, verb, fix)
            if exc is not None:  # for the plugin's author (AGENT_LINK_DEBUG); a user needs the line above
                log.debug("%s in %s", plugin, hook, exc_info=(type(exc), exc, exc.__traceback__))
            if self.sink is not None:
                try:
                    self.sink(problem.to_dict())
                except Exception:  # a diagnostic that cannot be kept must not become a failure
                    log.debug("plugin problem not recorded", exc_info=True)
        if disable and plugin not in self.disabled:
            self.disabled[plugin] = f"{hook}: {error}"
            if self.on_disable is not None:
                self.on_disable(plugin, f"{hook}: {error}")
        return problem

    def report(self) -> list[dict[str, Any]]:
        """Every recorded problem, oldest first."""
        return [p.to_dict() for p in self.problems.values()]

    # -- running

    def run(self, fn: Callable[[], Any]) -> Any:
        """Run ``fn`` in a worker thread, waiting at most the budget.

        A call made from inside a hook runs inline (it is already bounded by the outer call).

        :raises HookTimeout: when the budget is spent (the worker is abandoned, still running).
        """
        if self.timeout_ms <= 0 or getattr(_local, "in_worker", False):
            return fn()
        with self._lock:
            worker = self._idle.pop() if self._idle else _Worker()
        ctx = contextvars.copy_context()
        box: dict[str, Any] = {}
        done = threading.Event()
        worker.jobs.put((ctx, fn, box, done, _caller_loop()))
        if not done.wait(self.timeout_ms / 1000):
            raise HookTimeout()
        with self._lock:
            self._idle.append(worker)
        if "error" in box:
            raise box["error"]
        return box.get("value")


_local = threading.local()


class _Worker:
    """A daemon thread running hook calls one at a time (abandoned when one hangs)."""

    def __init__(self) -> None:
        self.jobs: queue.SimpleQueue[Any] = queue.SimpleQueue()
        threading.Thread(target=self._loop, name="agent-link-hooks", daemon=True).start()

    def _loop(self) -> None:
        _local.in_worker = True
        while True:
            ctx, fn, box, done, loop = self.jobs.get()
            # The caller's thread waits, so its event loop is paused: the hook runs as if on
            # that loop (code asking for the running loop finds the caller's, as it did when
            # hooks ran on the caller's thread).
            asyncio.events._set_running_loop(loop)
            try:
                box["value"] = ctx.run(fn)
            except BaseException as exc:  # handed to the caller's thread
                box["error"] = exc
            finally:
                asyncio.events._set_running_loop(None)
            done.set()


def _caller_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def timeout_from_env(env: Mapping[str, str]) -> int:
    """``AGENT_LINK_HOOK_TIMEOUT_MS`` (0 = unbounded); a bad value keeps the default."""
    raw = (env.get(TIMEOUT_ENV) or "").strip()
    try:
        value = int(raw) if raw else DEFAULT_TIMEOUT_MS
    except ValueError:
        return DEFAULT_TIMEOUT_MS
    return value if value == 0 or value >= 100 else DEFAULT_TIMEOUT_MS


def guard_plugin(boundary: Boundary, pm: Any, plugin: object, plugin_name: str) -> None:
    """Wrap every hook implementation of ``plugin`` (once) so its failures stay its own."""
    for caller in pm.get_hookcallers(plugin) or []:
        for impl in caller.get_hookimpls():
            if impl.plugin is plugin and not getattr(impl.function, "_agent_link_guarded", False):
                impl.function = _guarded(boundary, impl, plugin_name, caller.name)


def _guarded(boundary: Boundary, impl: Any, plugin: str, hook: str) -> Callable[..., Any]:
    func = impl.function
    if impl.hookwrapper or impl.wrapper:
        wrapper = _guarded_wrapper(boundary, func, plugin, hook, new_style=bool(impl.wrapper))
        wrapper._agent_link_guarded = True  # type: ignore[attr-defined]
        return wrapper
    check = RESULT_CHECKS.get(hook)
    refusing = hook in REFUSING_HOOKS
    registering = hook in REGISTRATION_HOOKS
    key = id(impl)

    def guarded(*args: Any, **kwargs: Any) -> Any:
        call = _CALL.get()
        if call is not None and key in call.done:
            return call.done[key]
        if call is not None:
            call.running = (plugin, hook)
        token = _PLUGIN.set(plugin)
        try:
            result = func(*args, **kwargs)
            if hook in AWAITABLE_HOOKS and inspect.isawaitable(result):
                result = _guarded_awaitable(boundary, result, plugin, hook, check, refusing)
            problem = check(result, plugin) if check is not None and result is not None and not inspect.isawaitable(result) else None
            if problem is not None:
                _fault(boundary, call, plugin, hook, problem, disable=registering)
                result = None
        except AgentLinkError as exc:
            if refusing:
                raise  # a documented refusal: the caller handles it
            _fault(boundary, call, plugin, hook, describe(exc), disable=registering, exc=exc)
            result = None
        except Refused:
            result = None  # already recorded by the register callback, which disabled the plugin
        except Exception as exc:
            _fault(boundary, call, plugin, hook, describe(exc), disable=registering, exc=exc)
            result = None
        finally:
            _PLUGIN.reset(token)
        if call is not None:
            call.done[key] = result
        return result

    guarded._agent_link_guarded = True  # type: ignore[attr-defined]
    return guarded


async def _guarded_awaitable(boundary: Boundary, awaitable: Any, plugin: str, hook: str,
                             check: Callable[[Any, str], str | None] | None, refusing: bool) -> Any:
    """An implementation's awaitable answer, awaited under the same rules as a plain answer
    (bounded by the budget; a hang here is reported but holds no thread, so nothing is disabled)."""
    token = _PLUGIN.set(plugin)
    try:
        if boundary.timeout_ms > 0:
            result = await asyncio.wait_for(awaitable, boundary.timeout_ms / 1000)
        else:
            result = await awaitable
    except AgentLinkError as exc:
        if refusing:
            raise
        boundary.fault(plugin, hook, describe(exc), exc=exc)
        return None
    except TimeoutError:
        boundary.fault(plugin, hook, f"its awaitable did not finish within {boundary.timeout_ms} ms")
        return None
    except Exception as exc:
        boundary.fault(plugin, hook, describe(exc), exc=exc)
        return None
    finally:
        _PLUGIN.reset(token)
    problem = check(result, plugin) if check is not None and result is not None else None
    if problem is not None:
        boundary.fault(plugin, hook, problem)
        return None
    return result


def _fault(boundary: Boundary, call: CallState | None, plugin: str, hook: str, error: str, *, fix: str = "",
           disable: bool = False, exc: BaseException | None = None) -> None:
    if call is not None:
        call.faulted.add(plugin)
    boundary.fault(plugin, hook, error, fix=fix, disable=disable, exc=exc)


def _guarded_wrapper(boundary: Boundary, func: Callable[..., Any], plugin: str, hook: str, *, new_style: bool) -> Callable[..., Any]:
    """A wrapper implementation that fails before or after its ``yield`` becomes a pass-through."""
    registering = hook in REGISTRATION_HOOKS
    refusing = hook in REFUSING_HOOKS

    def fault(exc: BaseException | str) -> None:
        text = exc if isinstance(exc, str) else describe(exc)
        _fault(boundary, _CALL.get(), plugin, hook, text, disable=registering,
               exc=exc if isinstance(exc, BaseException) else None)

    def guarded(*args: Any, **kwargs: Any) -> Any:
        try:
            gen = func(*args, **kwargs)
            next(gen)
        except StopIteration:
            fault("wrapper did not yield")
            return (yield)
        except Exception as exc:
            fault(exc)
            return (yield)
        if not new_style:  # old-style hookwrapper: gets a Result, returns nothing
            outcome = yield
            try:
                gen.send(outcome)
            except StopIteration:
                return None
            except Exception as exc:
                fault(exc)
                return None
            fault("hookwrapper yielded twice")
            return None
        try:
            result = yield
        except Exception as inner:  # a refusal from an inner implementation: the wrapper sees it
            try:
                gen.throw(inner)
            except StopIteration as stop:
                return stop.value
            except Exception as out:
                if out is inner or (refusing and isinstance(out, AgentLinkError)):
                    raise
                fault(out)
                raise inner from None
            fault("wrapper yielded twice")
            raise
        try:
            gen.send(result)
        except StopIteration as stop:
            return stop.value
        except Exception as exc:
            if refusing and isinstance(exc, AgentLinkError):
                raise
            fault(exc)
            return result
        fault("wrapper yielded twice")
        return result

    return guarded


def call_bounded(boundary: Boundary, call: CallState, fn: Callable[[], Any], empty: Any) -> Any:
    """Run one hook call (``fn`` calls pluggy) under ``call``'s state and the budget.

    On a hang, the plugin running at that moment is disabled and the call replayed without
    it; answers already given are reused. Returns ``empty`` when nobody can be blamed.
    """

    def invoke() -> Any:
        token = _CALL.set(call)
        try:
            return fn()
        finally:
            _CALL.reset(token)

    while True:
        started = time.monotonic()
        try:
            return boundary.run(invoke)
        except HookTimeout:
            blamed = call.running
            waited = int((time.monotonic() - started) * 1000)
            if blamed is None or blamed[0] in boundary.disabled:
                log.error("agent-link hook %s did not return within %d ms", call.hook, waited)
                return empty
            call.running = None
            boundary.fault(blamed[0], blamed[1], f"did not return within {boundary.timeout_ms} ms (hung)",
                           fix="A hook must return quickly; do I/O in a harness's async methods.", disable=True)
            call.faulted.add(blamed[0])
