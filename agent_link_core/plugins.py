"""Plugin loading and the typed facade over agent-link's hooks.

Build order (fixed): hook specs, blocked names from ``AGENT_LINK_DISABLE_PLUGINS``, entry
points of the ``agent_link`` group one at a time (a plugin that fails to import is recorded
and skipped, never fatal), the core's default plugins, then ``check_pending()`` so a
misspelled hook implementation fails loudly.
"""

from __future__ import annotations

import importlib
import inspect
import importlib.metadata
import logging
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

import pluggy

from agent_link_core import hookspecs
from agent_link_core.errors import AgentLinkError

if TYPE_CHECKING:  # pragma: no cover
    import click

    from agent_link_core.config import Setting
    from agent_link_core.app import App
    from agent_link_core.harness import Harness
    from agent_link_core.model import Caller
    from agent_link_core.mailbox import EnvelopeContribution, Event, OutgoingMessage, SendContext
    from agent_link_core.panels import Panel
    from agent_link_core.records import PromptHook
    from agent_link_core.reminders import DueReminders
    from agent_link_core.store import Migration
    from agent_link_core.tools.registry import ToolSpec

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "agent_link"
DEFAULT_PLUGINS = ("agent_link_core.default_plugins",)


@dataclass
class PluginReport:
    """What loading found: names loaded, blocked, and failures ``{name: reason}``."""

    loaded: list[str] = field(default_factory=list)
    blocked: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    versions: dict[str, str] = field(default_factory=dict)


def disabled_plugin_names(env: dict[str, str] | None = None) -> set[str]:
    """Names listed in ``AGENT_LINK_DISABLE_PLUGINS`` (comma or space separated)."""
    raw = (env if env is not None else os.environ).get("AGENT_LINK_DISABLE_PLUGINS", "")
    return {part.strip() for part in raw.replace(",", " ").split() if part.strip()}


def build_plugin_manager(
    *, env: dict[str, str] | None = None, extra_plugins: tuple[Any, ...] = ()
) -> tuple[pluggy.PluginManager, PluginReport]:
    """Build a fresh plugin manager.

    :param env: environment to read ``AGENT_LINK_DISABLE_PLUGINS`` from (default: process).
    :param extra_plugins: plugin objects registered after the entry points (tests use it).
    :returns: the manager and a :class:`PluginReport` for health.
    """
    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    report = PluginReport()
    blocked = disabled_plugin_names(env)
    for name in sorted(blocked):
        pm.set_blocked(name)
        report.blocked.append(name)
    for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        if ep.name in blocked or pm.has_plugin(ep.name):
            continue
        try:
            module = ep.load()
            pm.register(module, name=ep.name)
        except Exception as exc:  # a broken plugin must never take agent-link down
            report.failed[ep.name] = f"{type(exc).__name__}: {exc}"[:300]
            log.warning("agent-link plugin %s failed to load: %s", ep.name, exc)
            continue
        report.loaded.append(ep.name)
        if ep.dist is not None:
            report.versions[ep.name] = ep.dist.version
    for modname in DEFAULT_PLUGINS:
        pm.register(importlib.import_module(modname), name=modname)
    for plugin in extra_plugins:
        pm.register(plugin)
    pm.check_pending()
    return pm, report


class Hooks:
    """Typed facade: one method per hook, called with keyword arguments.

    :param pm: a manager from :func:`build_plugin_manager`.
    """

    def __init__(self, pm: pluggy.PluginManager) -> None:
        self._pm = pm
        #: the App these hooks serve; set by ``App.__init__`` and passed to hooks taking ``app``
        self.app: App | None = None

    def _collect(self, hook_name: str) -> list[tuple[str, Any]]:
        """Run a ``register``-style hook; returns ``[(plugin name, record)]``."""
        out: list[tuple[str, Any]] = []
        caller = getattr(self._pm.hook, hook_name)
        for impl in caller.get_hookimpls():
            name = self._pm.get_name(impl.plugin) or repr(impl.plugin)
            impl.function(register=lambda rec, _n=name: out.append((_n, rec)))
        return out

    def _unique(self, kind: str, records: list[tuple[str, Any]]) -> dict[str, Any]:
        by_name: dict[str, Any] = {}
        owner: dict[str, str] = {}
        for plugin, rec in records:
            if rec.name in by_name:
                raise AgentLinkError(
                    "internal_error",
                    f"{kind} {rec.name!r} is registered by both {owner[rec.name]} and {plugin}.",
                    {"cause": "DuplicateRegistration"},
                )
            by_name[rec.name] = rec
            owner[rec.name] = plugin
        return by_name

    def harnesses(self) -> dict[str, Harness]:
        """All registered harnesses by name (address scheme)."""
        return self._unique("harness", self._collect("agent_link_register_harnesses"))

    def tools(self) -> dict[str, ToolSpec]:
        """All registered MCP tools by name."""
        return self._unique("tool", self._collect("agent_link_register_tools"))

    def settings(self) -> tuple[Setting, ...]:
        """Settings declared by plugins (duplicate names are an error naming both)."""
        return tuple(self._unique("setting", self._collect("agent_link_register_settings")).values())

    def panels(self) -> list[Panel]:
        """Every plugin's panels, by ascending ``order`` then name (duplicate names are an
        error naming both plugins)."""
        found = self._unique("panel", self._collect("agent_link_register_panels")).values()
        return sorted(found, key=lambda p: (p.order, p.name))

    def prompt_hooks(self) -> dict[str, tuple[PromptHook, str]]:
        """Prompt-hook adapters by harness name, each with the plugin that registered it.

        :raises AgentLinkError: ``internal_error`` when a record is malformed (harness name,
            module path) or two plugins claim one harness.
        """
        from agent_link_core.prompt_hooks import HARNESS_RE, MODULE_RE

        records = self._collect("agent_link_register_prompt_hooks")
        for plugin, rec in records:
            if not HARNESS_RE.match(getattr(rec, "harness", "") or "") or not MODULE_RE.match(getattr(rec, "module", "") or ""):
                raise AgentLinkError(
                    "internal_error",
                    f"plugin {plugin} registered an invalid prompt hook {rec!r}: the harness must match"
                    " [a-z][a-z0-9-]{0,31} and the module be a dotted module path.",
                    {"plugin": plugin, "cause": "InvalidRegistration"},
                )
        owners = {rec.name: plugin for plugin, rec in records}
        return {name: (rec, owners[name]) for name, rec in self._unique("prompt hook", records).items()}

    async def push_reminders(self, due: DueReminders) -> bool:
        """Offer one session's due reminders to the plugin that pushes for its harness.

        :returns: True when a plugin reports the session reminded.
        """
        result = self._pm.hook.agent_link_push_reminders(due=due, app=self.app)
        if inspect.isawaitable(result):
            result = await result
        return bool(result)

    def register_commands(self, cli: click.Group) -> None:
        """Let every plugin add its click commands to ``cli``."""
        self._pm.hook.agent_link_register_commands(cli=cli)

    def migrations(self) -> list[Migration]:
        """Every plugin's schema migrations, flattened."""
        return [m for batch in self._pm.hook.agent_link_schema() if batch for m in batch]

    def resolve_address(self, address: str, caller_address: str) -> dict[str, Any] | None:
        """The first plugin's resolution of an indirect address, or None (may raise AgentLinkError)."""
        return self._pm.hook.agent_link_resolve_address(address=address, caller_address=caller_address, app=self.app)

    def before_send(self, message: OutgoingMessage, context: SendContext) -> list[dict[str, Any]]:
        """Run every ``before_send`` check; returns their warnings (a refusal raises AgentLinkError)."""
        results = self._pm.hook.agent_link_before_send(message=message, context=context, app=self.app)
        return [w for batch in results if batch for w in batch]

    def render_envelope(self, message: dict[str, Any]) -> list[EnvelopeContribution]:
        """Every plugin's envelope contribution for a stored message."""
        return [c for c in self._pm.hook.agent_link_render_envelope(message=message, app=self.app) if c]

    def check_override(
        self, target: str, sender: Caller, setting: str, value: str, context: dict[str, Any]
    ) -> dict[str, Any] | None:
        """Ask the policy plugin (if any) whether an override is allowed; None = no policy."""
        return self._pm.hook.agent_link_check_override(
            target=target, sender=sender, setting=setting, value=value, context=context, app=self.app
        )

    def session_roles(self, addresses: list[str]) -> dict[str, list[str]]:
        """``{address: sorted role names}`` from every plugin that keeps roles; a failing
        plugin is logged and contributes nothing."""
        merged: dict[str, set[str]] = {}
        for impl in self._pm.hook.agent_link_session_roles.get_hookimpls():
            try:
                answer = impl.function(**_wanted(impl, addresses=list(addresses), app=self.app))
            except Exception:  # a listing must not fail because of a roles plugin
                log.exception("agent_link_session_roles failed in %s", self._pm.get_name(impl.plugin))
                continue
            if not isinstance(answer, dict):
                continue
            for address, names in answer.items():
                merged.setdefault(address, set()).update(names)
        return {address: sorted(names) for address, names in merged.items()}

    def on_event(self, event: Event) -> None:
        """Notify observers; an observer's exception is logged, never raised."""
        for impl in self._pm.hook.agent_link_on_event.get_hookimpls():
            try:
                impl.function(**_wanted(impl, event=event, app=self.app))
            except Exception:  # observers must not undo committed changes
                log.exception("agent_link_on_event failed in %s", self._pm.get_name(impl.plugin))

    def server_tasks(self) -> list[tuple[str, Any]]:
        """``[(plugin name, coroutine function)]`` an MCP server runs in the background."""
        tasks: list[tuple[str, Any]] = []
        for impl in self._pm.hook.agent_link_server_tasks.get_hookimpls():
            name = self._pm.get_name(impl.plugin) or "?"
            contributed: Any = impl.function(**_wanted(impl, app=self.app)) or []
            tasks.extend((name, task) for task in contributed)
        return tasks

    def health_sections(self) -> dict[str, Any]:
        """Each plugin's health section; a failing one reports its error instead."""
        sections: dict[str, Any] = {}
        for impl in self._pm.hook.agent_link_health.get_hookimpls():
            name = self._pm.get_name(impl.plugin) or "?"
            try:
                result = impl.function(**_wanted(impl, app=self.app))
            except Exception as exc:
                sections[name] = {"error": f"{type(exc).__name__}: {exc}"[:300]}
                continue
            if result:
                sections[result[0]] = result[1]
        return sections


def _wanted(impl: Any, **kwargs: Any) -> dict[str, Any]:
    """The keyword arguments an implementation declared (pluggy lets it take a subset)."""
    return {name: kwargs[name] for name in impl.argnames if name in kwargs}


def trace_hook_calls(pm: pluggy.PluginManager, sink: Callable[[str], None]) -> Callable[[], None]:
    """Report every hook call to ``sink`` (``AGENT_LINK_DEBUG``); returns an undo function."""

    def before(hook_name: str, hook_impls: Any, kwargs: dict[str, Any]) -> None:
        sink(f"hook {hook_name}({', '.join(sorted(kwargs))})")

    def after(outcome: Any, hook_name: str, hook_impls: Any, kwargs: dict[str, Any]) -> None:
        return None

    return pm.add_hookcall_monitoring(before, after)
