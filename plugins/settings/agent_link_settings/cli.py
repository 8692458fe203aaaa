"""``agent-link config get|set|unset|list``: read and edit the settings file.

The file and its rules are described in :mod:`agent_link_core.settings_file` (the core reads
it in every process; this plugin only edits it). ``set`` accepts
only declared settings (the core's and the installed plugins') and a value the setting
accepts, so a typo fails here rather than silently in some later process. Writing keeps the
document's other keys and tables (tomli-w; comments are lost) and leaves the file 0600.
``list`` never prints a credential: a secret setting's value (``Setting.secret``) and the
password or token of a URL in any value are masked; ``get NAME`` prints the value asked for.
"""

from __future__ import annotations

import json
import os
from typing import Any

import click

from agent_link_core.cli import fail
from agent_link_core.boundary import CORE_PLUGIN as CORE_PLUGIN_NAME
from agent_link_core.config import CORE_SETTINGS, Setting, load_config, shown_raw
from agent_link_core.errors import AgentLinkError
from agent_link_core.settings_file import SettingsEnv, read_file, settings_path, variable_name


def declared_settings() -> dict[str, Setting]:
    """Every declared setting by variable name (core first, then the installed plugins'), from the plugins this
    invocation loaded (loading them again reported a broken plugin twice)."""
    from agent_link_core.cli import plugin_hooks

    return {s.name: s for s in (*CORE_SETTINGS, *plugin_hooks(click.get_current_context()).settings())}


def _loaded(settings: dict[str, Setting]) -> Any:
    """The settings as every process reads them; a refused value is said on stderr (with its
    variable, value and what is allowed) and shown at its default, source ``default``, so the
    command that shows settings still shows the others.

    :raises AgentLinkError: ``invalid_arguments`` for a settings file that is not valid TOML.
    """
    problems: list[AgentLinkError] = []
    cfg = load_config(None, tuple(s for s in settings.values() if s not in CORE_SETTINGS), on_setting_error=problems.append)
    for problem in problems:
        if not problem.details.get("errors"):  # the file itself is unreadable: nothing to show
            raise problem
        click.echo(f"warning: {problem.message} Every other agent-link command refuses to run until it is fixed.", err=True)
    return cfg


def _setting(name: str, settings: dict[str, Setting]) -> Setting:
    variable = variable_name(name)
    if variable not in settings:
        raise AgentLinkError("invalid_arguments", f"There is no agent-link setting {variable}.", {"setting": variable},
                             hint="`agent-link config list` names every setting.")
    return settings[variable]


def _typed(setting: Setting, raw: str) -> Any:
    """``raw`` checked the way the setting is read, as the TOML value to store.

    :raises AgentLinkError: ``invalid_arguments`` when the setting would not accept it.
    """
    if not raw.strip() and setting.kind != "str":  # read as unset: it would pin the default, or nothing
        raise AgentLinkError("invalid_arguments", f"{setting.name} cannot be empty: `agent-link config unset "
                             f"{setting.name}` goes back to its default.", {"setting": setting.name}, hint="Nothing was written.")
    problems: list[AgentLinkError] = []
    # only this value is checked: a SettingsEnv is taken as is, so the file is not read
    cfg = load_config(SettingsEnv({"HOME": os.path.expanduser("~"), setting.name: raw}),
                      (setting,) if setting not in CORE_SETTINGS else (), on_setting_error=problems.append)
    # The reader's own words speak of an environment variable; here nothing is read yet, so
    # say what the value should be.
    if problems:
        expected = "; ".join(str(e.get("expected", "")) for e in problems[0].details.get("errors", [])) or problems[0].message
        raise AgentLinkError("invalid_arguments", f"{setting.name} cannot be {shown_raw(raw)}: expected {expected}.",
                             {"setting": setting.name}, hint="Nothing was written.")
    if setting.kind == "flag":
        return bool(cfg.values[setting.name])
    if setting.kind == "int":
        return int(cfg.values[setting.name])
    return raw.strip()


#: settings naming plugins (comma or space separated)
PLUGIN_LISTS = ("AGENT_LINK_DISABLE_PLUGINS", "AGENT_LINK_LOAD_PLUGINS")


def _check_known(setting: Setting, value: str) -> None:
    """Refuse a value naming what is not installed: a plugin in the plugin lists, a harness in
    ``AGENT_LINK_HOST``, an item of ``AGENT_LINK_TOOLS`` that is neither a profile, a plugin
    nor a tool (each would be ignored by every process, silently or with a health warning).

    :raises AgentLinkError: ``invalid_arguments`` naming the unknown items and the known values.
    """
    from agent_link_core import discovery
    from agent_link_core.plugins import ENTRY_POINT_GROUP, Hooks, plugins_of

    # every installed plugin, whatever this process's plugin lists leave out: the value is
    # for every process, and the lists themselves may be what is being set
    def every_plugin() -> Hooks:
        return plugins_of({k: v for k, v in os.environ.items() if k not in PLUGIN_LISTS})

    if setting.name in PLUGIN_LISTS:
        known = sorted({ep.name for ep in discovery.entry_points(ENTRY_POINT_GROUP)})
        unknown = [i for i in value.replace(",", " ").split() if i not in known]
    elif setting.name == "AGENT_LINK_HOST":
        known = sorted(every_plugin().harnesses())
        unknown = [value] if value and value not in known else []
    elif setting.name == "AGENT_LINK_TOOLS":  # declared by the profiles plugin, whose public API says what it takes
        from agent_link_profiles import profiles as tool_profiles

        hooks = every_plugin()
        tools, owners = hooks.tools(), hooks.tool_owners()
        # the tool names are too many for one line
        known = [tool_profiles.ALL, tool_profiles.MESSAGING, *sorted(set(owners.values()) - {CORE_PLUGIN_NAME}),
                 f"or a tool's name ({len(tools)} tools)"]
        unknown = tool_profiles.unmatched(tools, owners, value)
    else:
        return
    if unknown:
        raise AgentLinkError("invalid_arguments", f"{setting.name} cannot name {', '.join(map(repr, unknown))}: "
                             f"expected {'' if setting.name == 'AGENT_LINK_HOST' else 'items of '}"
                             f"{', '.join(known) or 'nothing (none is installed)'}.",
                             {"setting": setting.name, "unknown": unknown}, hint="Nothing was written.")


def _keys_for(document: dict[str, Any], variable: str) -> list[str]:
    return [k for k, v in document.items() if not isinstance(v, dict) and variable_name(k) == variable]


def write_document(path: str, document: dict[str, Any]) -> None:
    """Write ``document`` to ``path`` as TOML, atomically, file 0600 in a 0700 folder (the
    folders it creates are 0700 too, whatever the umask).

    :raises AgentLinkError: ``state_io_error`` when the folder or file cannot be written.
    """
    import tomli_w

    from agent_link_core.store import ensure_private_dir, state_io_error

    ensure_private_dir(os.path.dirname(path))
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "wb") as handle:
            tomli_w.dump(document, handle)
        os.replace(tmp, path)
    except OSError as exc:
        raise state_io_error(path, exc) from exc


HIDDEN = "(hidden)"


def shown(setting: Setting, value: Any) -> Any:
    """What ``config list`` shows of ``setting``'s ``value``: :data:`HIDDEN` for a secret
    setting that is set; in a string, each URL's password or token (``scheme://user:password@``,
    ``scheme://token@``, comma-separated URLs each) as ``***``; anything else as it is."""
    if value is None:
        return None
    if setting.secret:
        return HIDDEN
    if not isinstance(value, str) or "://" not in value:
        return value
    parts = []
    for part in value.split(","):
        scheme, sep, rest = part.partition("://")
        userinfo, at, host = rest.rpartition("@")  # a password may hold "@" or "/": the last "@" ends it
        if sep and at:
            user, colon, _ = userinfo.partition(":")
            part = f"{scheme}://{user + ':***' if colon else '***'}@{host}"
        parts.append(part)
    return ",".join(parts)


@click.group()
def config() -> None:
    """Read and edit the settings file every agent-link process reads (the environment
    overrides it)."""


@config.command("list")
@click.option("--json", "as_json", is_flag=True, help="print JSON")
def list_(as_json: bool) -> None:
    """Every setting: its value (credentials masked), where it came from, and what it does."""
    try:
        settings = declared_settings()
        cfg = _loaded(settings)
    except AgentLinkError as exc:
        fail(exc)
    rows = [{"name": n, "value": shown(s, cfg.values.get(n)), "source": cfg.sources.get(n), "doc": s.doc}
            for n, s in settings.items()]
    if as_json:
        click.echo(json.dumps({"version": 1, "settingsFile": cfg.settings_file, "settings": rows}, indent=2))
        return
    click.echo(f"settings file: {cfg.settings_file}")
    for row in rows:
        click.echo(f"{row['name']:<38} {json.dumps(row['value']):<28} {row['source']}")


@config.command()
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="print JSON")
def get(name: str, as_json: bool) -> None:
    """The value of one setting (NAME: AGENT_LINK_STATE_DIR or state_dir) and its source."""
    try:
        settings = declared_settings()
        setting = _setting(name, settings)
        cfg = _loaded(settings)
    except AgentLinkError as exc:
        fail(exc)
    value, source = cfg.values.get(setting.name), cfg.sources.get(setting.name)
    if as_json:
        click.echo(json.dumps({"version": 1, "name": setting.name, "value": value, "source": source}))
    else:
        click.echo(f"{'(not set)' if value is None else value}\t({source})")


@config.command("set")
@click.argument("name")
@click.argument("value")
def set_(name: str, value: str) -> None:
    """Write a setting to the settings file."""
    path = settings_path()
    try:
        setting = _setting(name, declared_settings())
        typed = _typed(setting, value)
        _check_known(setting, str(typed))
        document = read_file(path)
    except AgentLinkError as exc:
        fail(exc)
    keys = _keys_for(document, setting.name)
    for key in keys[1:]:
        del document[key]
    document[keys[0] if keys else setting.name.removeprefix("AGENT_LINK_").lower()] = typed
    write_document(path, document)
    click.echo(f"{setting.name} = {json.dumps(typed)} written to {path}")
    if os.environ.get(setting.name):
        click.echo(f"note: {setting.name} is set in this environment, which overrides the file", err=True)


@config.command()
@click.argument("name")
def unset(name: str) -> None:
    """Remove a setting from the settings file."""
    path = settings_path()
    try:
        setting = _setting(name, declared_settings())
        document = read_file(path)
    except AgentLinkError as exc:
        fail(exc)
    keys = _keys_for(document, setting.name)
    if not keys:
        click.echo(f"{setting.name} is not in {path}")
        return
    for key in keys:
        del document[key]
    write_document(path, document)
    click.echo(f"{setting.name} removed from {path}")
