"""``AGENT_LINK_*`` settings (the core's, and plugins' from ``agent_link_register_settings``), parsed by docs/behaviour.md §23:
a refused value is an error, never its default. Light standard modules only: the hook fast path uses it.
"""

from __future__ import annotations

import os

from agent_link_core.errors import AgentLinkError, Refused
from agent_link_core.settings_file import SettingsEnv, settings_path, with_settings

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any


class Setting:
    """One environment setting.

    :param name: canonical variable name (``AGENT_LINK_...``).
    :param kind: ``flag``, ``int``, ``path``, ``str``, ``choice`` or ``address`` (``<harness>:<id>``: lower-case
        harness of up to 32 characters, an id of up to 128 of ``A-Z a-z 0-9 _ . -``).
    :param default: value when unset (already parsed; ``None`` allowed).
    :param aliases: the original tools' names, read when the canonical one is unset.
    :param minimum/maximum: inclusive bounds for ``int``.
    :param choices: allowed values for ``choice`` (compared lower-case).
    :param warning: the ``rule`` in the error's details when a value is refused (``int`` / ``choice``; default ``range`` / ``choice``).
    :param doc: one line for ``agent-link health`` and the README.
    :param secret: the value is a credential (a password, a token): listings show it is set, never the value.
    """

    __slots__ = ("name", "kind", "default", "aliases", "minimum", "maximum", "choices", "warning", "doc", "secret")

    def __init__(
        self, name: str, kind: str, default: Any = None, *, aliases: tuple[str, ...] = (), minimum: int | None = None,
        maximum: int | None = None, choices: tuple[str, ...] = (), warning: str | None = None, doc: str = "", secret: bool = False,
    ) -> None:
        if kind not in ("flag", "int", "path", "str", "choice", "address"):
            raise ValueError(f"unknown setting kind {kind!r}")
        self.name, self.kind, self.default, self.aliases = name, kind, default, tuple(aliases)
        self.minimum, self.maximum, self.choices, self.warning, self.doc, self.secret = minimum, maximum, tuple(choices), warning, doc, secret

    def __repr__(self) -> str:
        return f"Setting({self.name!r}, {self.kind!r}, {self.default!r})"


#: variables other than settings that the core reads (the settings file, the start-up cache, installed host folders): every host
#: must pass them to agent-link's server, as it must each harness's ``env_variables``
CORE_ENV_VARIABLES: tuple[str, ...] = ("XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME")

CORE_SETTINGS: tuple[Setting, ...] = (
    Setting("AGENT_LINK_STATE_DIR", "path", "~/.agent-link", doc="state directory (database, logs, plugin files)"),
    Setting("AGENT_LINK_MAILBOX_PATH", "path", None, doc="mailbox database file (default <state>/agent-link.db)"),
    Setting("AGENT_LINK_HOST", "str", None, doc="the host this process serves (a harness name); sniffed when unset"),
    Setting("AGENT_LINK_ADDRESS", "address", None, doc="this process's own address when no harness can tell it"),
    Setting("AGENT_LINK_DISABLE_PLUGINS", "str", "", doc="plugin names not to load (comma or space separated)"),
    Setting("AGENT_LINK_LOAD_PLUGINS", "str", None, doc="when set, the only plugins to load (comma or space separated; empty: none)"),
    Setting("AGENT_LINK_HOOK_TIMEOUT_MS", "int", 30000, minimum=0, maximum=86_400_000, warning="hook_timeout_ignored",
            doc="budget of one plugin call in ms; a call still running then is interrupted and answers nothing (0: no budget; at most a day)"),
    Setting("AGENT_LINK_DEBUG", "flag", False, doc="debug logging and hook-call tracing to the log file"),
    Setting("AGENT_LINK_LOG_LEVEL", "choice", None, choices=("error", "warn", "info", "debug"), doc="log level"),
    Setting("AGENT_LINK_LOG_FILE", "path", None, doc="log file (default <state>/logs/agent-link.log)"),
    Setting("AGENT_LINK_INSPECT_ALL", "flag", False, doc="allow scope 'all' (every mailbox) in inspect and receipts"),
    Setting("AGENT_LINK_BUSY_TIMEOUT_MS", "int", 10000, minimum=100, maximum=600000, warning="busy_timeout_ignored",
            doc="how long a write waits for another process's database lock before state_busy (100-600000 ms)"),
    Setting("AGENT_LINK_CONFIG", "path", None, doc="the settings file (default ~/.config/agent-link/config.toml)"),
    Setting("AGENT_LINK_MCP_FRONT", "flag", True,
            doc="agent-link mcp answers initialize and tools/list from its start-up cache while loading"),
    Setting("AGENT_LINK_REMINDER_LIMIT", "int", 3, minimum=0, maximum=20, warning="reminder_limit_ignored",
            doc="reminders per message before it becomes unresolved (0-20)"),
    Setting("AGENT_LINK_REMINDER_INTERVAL_MS", "int", 30000, minimum=30000, maximum=2_592_000_000, warning="reminder_interval_ignored",
            doc="reminder interval in ms (30000-2592000000, 30 days)"),
)


class Config:
    """Parsed settings (built by :func:`load_config`): ``values`` by canonical name; ``sources``: the variable read, ``settings-file``
    or ``default`` (also for a refused value a caller chose to collect); ``deprecated`` and ``conflicts`` for health.
    """

    def __init__(self) -> None:
        self.values: dict[str, Any] = {}
        self.sources: dict[str, str] = {}
        self.deprecated: list[dict[str, str]] = []
        self.conflicts: list[dict[str, str]] = []
        #: the settings file this process read (or would read: it may not exist)
        self.settings_file = ""

    def get(self, name: str) -> Any:
        """The parsed value of setting ``name``; ``KeyError`` for an undeclared one."""
        return self.values[name]

    @property
    def state_dir(self) -> str:
        """The state directory (absolute path string)."""
        return self.values["AGENT_LINK_STATE_DIR"]

    @property
    def db_path(self) -> str:
        """The database file (absolute path string)."""
        explicit = self.values.get("AGENT_LINK_MAILBOX_PATH")
        return explicit or os.path.join(self.state_dir, "agent-link.db")

    @property
    def reminder_limit(self) -> int:
        """Reminders per message before it becomes unresolved (0-20)."""
        return int(self.values["AGENT_LINK_REMINDER_LIMIT"])

    @property
    def reminder_interval_ms(self) -> int:
        """Time between reminders, in ms (30000-2592000000)."""
        return int(self.values["AGENT_LINK_REMINDER_INTERVAL_MS"])

    def env_report(self) -> dict[str, Any]:
        """The ``env`` section of health: deprecated aliases and conflicts, names only."""
        return {"deprecated": list(self.deprecated), "conflicts": list(self.conflicts)}


def parse_flag(name: str, raw: str) -> bool:
    """Parse a flag value; raises ``AgentLinkError(invalid_arguments)`` naming ``name``."""
    word = raw.strip().lower()
    if word not in ("1", "true", "yes", "on", "0", "false", "no", "off"):
        raise _bad(name, "flag", "one of 1/true/yes/on or 0/false/no/off", raw)
    return word in ("1", "true", "yes", "on")


def parse_path(name: str, raw: str, home: str | None = None) -> str:
    """Expand ``~/`` and require an absolute path; raises naming ``name`` otherwise."""
    value = raw.strip()
    if value == "~" or value.startswith("~/"):
        base = home if home is not None else os.path.expanduser("~")
        value = base + value[1:]
    if not os.path.isabs(value):
        raise _bad(name, "absolute_path", "an absolute path or one starting with ~/", raw)
    if not_utf8(value):  # no JSON, log or host carries such a name
        raise _bad(name, "utf8_path", "a path in UTF-8 (it has a byte that is not UTF-8)", raw)
    return os.path.normpath(value)


def not_utf8(text: str) -> bool:
    """Whether ``text`` holds bytes that are no UTF-8 (PEP 383 keeps them as lone surrogates U+DC80-U+DCFF)."""
    return any("\udc80" <= c <= "\udcff" for c in text)


def shown_raw(raw: str) -> str:
    """``raw`` quoted for an error line: cut to 60 characters, bytes that are no UTF-8 as ``\\xff``."""
    text = raw if len(raw) <= 60 else raw[:57] + "..."
    return repr(os.fsencode(text))[1:] if not_utf8(text) else repr(text)


def _bad(name: str, rule: str, expected: str, raw: str) -> AgentLinkError:
    return AgentLinkError("invalid_arguments", f"The environment variable {name}={shown_raw(raw)} is invalid: expected {expected}.",
                          {"errors": [{"path": f"env.{name}", "rule": rule, "expected": expected}]}, hint=f"Fix or unset {name}.")


def load_config(env: Mapping[str, str] | None = None, extra: tuple[Setting, ...] = (),
                on_setting_error: Callable[[AgentLinkError], None] | None = None) -> Config:
    """Read every declared setting from ``env`` (default: ``os.environ``), or else from the settings file (source ``settings-file``).

    :param extra: plugin settings (from ``agent_link_register_settings``).
    :param on_setting_error: called with the error of an invalid value or settings file instead of raising it (``config list``
        reports them all); a refused value's setting keeps its default, source ``default``.
    :raises AgentLinkError: ``invalid_arguments`` naming the variable, its value and what is allowed; also for an unreadable or
        invalid settings file.
    """
    try:
        env = with_settings(env)
    except AgentLinkError as exc:  # an invalid settings file: the environment alone still counts
        if on_setting_error is None:
            raise
        on_setting_error(exc)
        env = SettingsEnv(os.environ if env is None else env)
        env.path = settings_path(env)
    home = env.get("HOME")
    cfg = Config()
    cfg.settings_file = env.path
    for setting in CORE_SETTINGS + extra:
        raw, source = _read(setting, env, cfg)
        cfg.sources[setting.name] = "settings-file" if source in env.from_file else source
        value = setting.default
        if raw is not None:
            try:
                value = _parse(setting, raw, home, source)
            except AgentLinkError as exc:
                if source in env.from_file:  # said for the settings file, where the value really came from
                    error = {**exc.details["errors"][0], "path": f"file.{setting.name}"}
                    exc = AgentLinkError(exc.code, f"{setting.name} = {shown_raw(raw)} in the settings file {env.path} is invalid: "
                                         f"expected {error['expected']}.", {"errors": [error]},
                                         hint=f"Fix it with `agent-link config set`, or drop it with `agent-link config unset {setting.name}`.")
                if on_setting_error is None:
                    raise exc from None
                on_setting_error(exc)  # value is still the default
                cfg.sources[setting.name] = "default"
        if setting.kind == "path" and isinstance(value, str):
            value = parse_path(setting.name, value, home)
        cfg.values[setting.name] = value
    return cfg


def _read(setting: Setting, env: Mapping[str, str], cfg: Config) -> tuple[str | None, str]:
    """The raw value and the variable it came from (``default``: unset). The canonical name wins, then the first alias set;
    aliases in use and values passed over go to ``cfg``."""
    canonical = env.get(setting.name)
    if canonical == "" and setting.kind != "str":  # only a str setting gives an empty value a meaning: refused
        return canonical, setting.name
    if not setting.aliases:  # most settings: the loop below is measurable on the hook path
        return (canonical, setting.name) if canonical else (None, "default")
    aliases = [a for a in setting.aliases if env.get(a) or (a in env and setting.kind != "str")]
    cfg.deprecated += [{"name": alias, "canonical": setting.name} for alias in aliases]
    used = [setting.name, *aliases] if canonical else aliases
    if not used:
        return None, "default"
    for alias in used[1:]:
        if env[alias] != env[used[0]]:
            cfg.conflicts.append({"canonical": setting.name, "winner": used[0], "ignored": alias})
    return env[used[0]], used[0]


def _parse(setting: Setting, raw: str, home: str | None, name: str) -> Any:
    """``raw`` parsed as ``setting``; errors name ``name``, the variable read (maybe an alias)."""
    if setting.kind == "flag":
        return parse_flag(name, raw)
    if setting.kind == "path":
        return parse_path(name, raw, home)
    if setting.kind == "address":
        from agent_link_core.addresses import is_address

        if not is_address(raw.strip()) or raw.strip().startswith("role:"):  # a role is mail's way to a session, never a sender
            raise _bad(name, "address", "an address <harness>:<id> such as team:alice (lower-case harness; not a role:<name>)", raw)
        return raw.strip()
    if setting.kind == "int":
        try:
            number = int(raw.strip())
        except ValueError:
            number = None
        low, high = setting.minimum, setting.maximum
        if number is None or (low is not None and number < low) or (high is not None and number > high):
            bounds = {(True, True): f" from {low} to {high}", (True, False): f" of at least {low}", (False, True): f" of at most {high}"}
            raise _bad(name, setting.warning or "range", "a whole number" + bounds.get((low is not None, high is not None), ""), raw)
        return number
    if setting.kind == "choice":
        word = raw.strip().lower()
        if word not in setting.choices:
            raise _bad(name, setting.warning or "choice", "one of " + ", ".join(setting.choices), raw)
        return word
    return raw.strip()


def _env_name(value: object, prefix: str, longest: int, chars: frozenset[str] = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")) -> bool:
    """``value`` is ``prefix`` and then 1 to ``longest`` of A-Z 0-9 _ (string operations: every command checks these)."""
    return isinstance(value, str) and value.startswith(prefix) and 0 < len(value) - len(prefix) <= longest and chars.issuperset(value)


def check_setting(record: Any, core_names: frozenset[str]) -> None:
    """Refuse a setting that is not a :class:`Setting`, is badly named, or would shadow one of the core's settings (its name or an alias)."""
    if not isinstance(record, Setting):
        raise Refused(f"registered a {type(record).__name__}, not a Setting", "Register agent_link_core.config.Setting records.")
    if not _env_name(record.name, "AGENT_LINK_", 64):
        raise Refused(f"registered a setting named {record.name!r}", "Setting names are AGENT_LINK_ followed by A-Z 0-9 _.")
    if record.name in core_names:
        raise Refused(f"registered {record.name}, which is the core's own setting",
                      "A plugin cannot redefine a core setting; name yours AGENT_LINK_<PLUGIN>_...")
    for alias in record.aliases:
        if not _env_name(alias, "", 81) or not "A" <= alias[0] <= "Z":
            raise Refused(f"setting {record.name} has an alias {alias!r} that is not an environment variable name",
                          "Aliases are upper-case variable names.")
        if alias in core_names:
            raise Refused(f"setting {record.name} takes {alias} as an alias, which is the core's own setting",
                          "A plugin cannot read a core setting as its own.")
