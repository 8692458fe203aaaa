"""The ``agent-link`` command line for people and scripts.

Exit codes: see :data:`EXIT_HELP` (0 success, 1 refused or failed, 2 bad usage, 3-7 the
outcomes a script branches on). ``--json`` prints one versioned JSON object on stdout for
scripts, ``--ndjson`` the same object on one line; errors are one stderr line in the CLI's
own words (:mod:`agent_link_core.cli_text`), never a traceback.
Plugins add commands through ``agent_link_register_commands``; the group is built lazily
from the plugin manager, never mutated at import time.
"""

from __future__ import annotations

import json
import sys
from typing import Any, NoReturn

import click

from agent_link_core import __version__
from agent_link_core.app import App
from agent_link_core.errors import AgentLinkError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from agent_link_core.plugins import Hooks

EXIT_HELP = """\b
Exit codes:
  0  success (send: delivered, accepted or queued; find: exactly one match)
  1  agent-link refused or failed (stderr says why and what to do); send: rejected
  2  bad usage (unknown option, missing argument)
  3  send: outcome unknown (not resent; see --retry-unknown)
  4  find: no match
  5  find: several matches
  6  wait, send --wait: timed out before an answer
  7  send --require-delivered: not delivered (accepted or queued)
  130  Ctrl-C stopped the command (wait, send --wait: stderr says how to wait again)"""
EXIT_UNKNOWN, EXIT_NONE, EXIT_MANY, EXIT_TIMEOUT, EXIT_UNDELIVERED = 3, 4, 5, 6, 7
JSON_FORMAT_VERSION = 1


def fail(exc: AgentLinkError) -> NoReturn:
    """Print an AgentLinkError as one stderr line (plus its hint) and exit: 2 for bad
    arguments (usage), 1 for everything else (a bad setting included)."""
    from agent_link_core.cli_text import error_line

    ctx = click.get_current_context(silent=True)
    # at the root (a setting every command reads) there is no command to point at
    command = ctx.info_name if ctx is not None and ctx.parent is not None else None
    path = " ".join(ctx.command_path.split()[1:]) if command is not None and ctx is not None else None
    click.echo(error_line(exc, command, path or None), err=True)
    paths = [e.get("path", "") for e in exc.details.get("errors", [])] if exc.code == "invalid_arguments" else []
    sys.exit(2 if paths and not any(p.startswith(("env.", "file.")) for p in paths) else 1)


def get_app(ctx: click.Context) -> App:
    """The App for this invocation, created on first use and closed at exit; a state that
    cannot be opened ends the command with :func:`fail`."""
    try:
        return open_app(ctx)
    except AgentLinkError as exc:
        fail(exc)


def open_app(ctx: click.Context) -> App:
    """Like :func:`get_app`, for a command that reports the failure itself.

    :raises AgentLinkError: the state dir or database cannot be opened.
    """
    root = ctx.find_root()
    if "app" not in root.meta:
        options: dict[str, Any] = {"read_only_ok": True} if root.meta.get("read_only_ok") else {}
        if "hooks" in root.meta:  # loaded before, for a command that opens no database
            options["hooks"] = root.meta["hooks"]
        root.meta["app"] = App.create(**options)
        root.call_on_close(root.meta["app"].close)
    return root.meta["app"]


#: plugin commands that must open no database: looked up with the plugins loaded alone
#: (``config``, the settings plugin's, may be about to say where the database lives)
STATELESS_COMMANDS = ("config",)


def plugin_hooks(ctx: click.Context) -> Hooks:
    """The plugins of this invocation, loaded without opening the database (for
    :data:`STATELESS_COMMANDS`); an App opened later reuses them.

    :raises AgentLinkError: the settings file cannot be read.
    """
    root = ctx.find_root()
    if "app" in root.meta:
        return root.meta["app"].hooks
    if "hooks" not in root.meta:
        from agent_link_core.plugins import load_plugins

        root.meta["hooks"] = load_plugins()
    return root.meta["hooks"]


def emit(data: Any, as_json: bool, human: Any, ndjson: bool = False) -> None:
    """Print ``data`` as JSON (``--json`` indented, ``--ndjson`` one line) or call ``human(data)``.
    A JSON object without a ``version`` field gets ``version`` :data:`JSON_FORMAT_VERSION`."""
    if (as_json or ndjson) and isinstance(data, dict) and "version" not in data:
        data = {"version": JSON_FORMAT_VERSION, **data}
    if ndjson:
        click.echo(json.dumps(data, ensure_ascii=False, separators=(",", ":")))
    elif as_json:
        click.echo(json.dumps(data, ensure_ascii=False, indent=2))
    else:
        human(data)


class WholeRange(click.IntRange):
    """An integer range whose refusal of a non-number says "not a valid integer" (click's own
    says "integer range", which reads as if a range were expected)."""

    name = "integer"


class FiniteRange(click.FloatRange):
    """A float range that also refuses ``nan`` (every comparison with it is false, so a plain
    range lets it through)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if number != number:
            self.fail(f"{value!r} is not a number.", param, ctx)
        return number


def output_lost(exc: OSError, what: str = "") -> NoReturn:
    """End a command whose stdout could not be written (a closed pipe, a full disk): one
    stderr line saying so (``what`` adds what was left undone), exit 1. Stdout is pointed at
    the null device first, so the interpreter's last flush of the unwritten rest adds nothing."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # no file descriptor (a test runner's stream)
        pass
    reason = exc.strerror or type(exc).__name__
    click.echo(f"agent-link: could not write the output ({reason}){'; ' + what if what else ''}.", err=True)
    sys.exit(1)


def show_then_mark(show: Any, mark: Any, what: str) -> Any:
    """Print a read (``show()``), make sure it reached stdout, and only then call ``mark()``
    (what marks the shown mail read): output that never reached its reader marks nothing.

    :param what: what stays undone when the output is lost, for the error line.
    :returns: what ``mark()`` returns.
    """
    try:
        show()
        sys.stdout.flush()
    except OSError as exc:
        output_lost(exc, what)
    return mark()


def run_async(coro: Any, inline: bool = False) -> Any:
    """Run a coroutine of the typed API, turning an AgentLinkError into a one-line exit 1.

    :param inline: the call awaits no I/O (see :func:`agent_link_core.aio.run_inline`): run
        it without starting (or importing) asyncio.
    """
    try:
        if inline:
            from agent_link_core.aio import run_inline

            return run_inline(coro)
        import asyncio

        return asyncio.run(coro)
    except AgentLinkError as exc:
        fail(exc)


def machine_column(sessions: list[dict[str, Any]]) -> list[str] | None:
    """The MACHINE cells of a session table when a plugin listed sessions of other machines
    (their ``machine`` field; ``(stale)`` after a listing too old to trust), else None: a
    machine on its own shows no such column."""
    if not any(s.get("machine") for s in sessions):
        return None
    return [f"{s.get('machine') or ''}{' (stale)' if s.get('machineStale') else ''}" for s in sessions]


def printable(value: Any) -> str:
    """A cell for a terminal: control, format and bidi characters (which could drive the
    terminal or disguise text), line breaks and tabs included, become visible escapes
    (:func:`agent_link_core.visible.visible`)."""
    from agent_link_core.visible import visible

    return visible("" if value is None else str(value), keep="")


def table(columns: list[str], rows: list[list[Any]]) -> None:
    """A table for people (rich). Piped output is never cut to a terminal width, so the
    address column can be copied or grepped."""
    from rich.console import Console
    from rich.table import Table

    t = Table(*columns, box=None, pad_edge=False, highlight=False)
    for row in rows:
        t.add_row(*(printable(v) for v in row))
    console = Console(soft_wrap=True, markup=False, emoji=False)
    if not console.is_terminal:
        console = Console(soft_wrap=True, markup=False, emoji=False, width=100_000)
    console.print(t)


def provider_lines(providers: dict[str, Any]) -> None:
    """One stderr line per unreachable source, so a partial listing never looks complete."""
    for name, p in providers.items():
        if not p.get("complete", True):
            click.echo(f"agent-link: {name}: not fully listed ({p.get('reason') or 'incomplete'})", err=True)
        for ep in p.get("endpoints", []) or []:
            if not ep.get("reachable", True):
                click.echo(f"agent-link: {name} endpoint {ep.get('id')} ({ep.get('source')}) is unreachable", err=True)


def _print_health(h: dict[str, Any]) -> None:
    click.echo(f"agent-link {h['version']}")
    click.echo(f"  address:    {h['address']} ({h['addressSource']})")
    click.echo(f"  host:       {h['host'] or 'unknown'}")
    click.echo(f"  state dir:  {h['stateDir']['path']} ({'exists' if h['stateDir']['exists'] else 'missing'})")
    if h["stateDir"].get("warning"):
        click.echo(f"  warning: {h['stateDir']['warning']['message']}. {h['stateDir']['warning']['hint']}")
    settings = h.get("settings") or {}
    click.echo(f"  settings:   {settings.get('file')}"
               + "".join(f"\n    {n} from {src}" for n, src in (settings.get("sources") or {}).items()))
    for other in settings.get("otherStateDirs") or []:
        click.echo(f"  warning: another agent-link process recently used the state dir {other['path']}: a separate mailbox"
                   " (set AGENT_LINK_STATE_DIR alike everywhere: `agent-link config set state_dir ...`)")
    db = h["database"]
    click.echo(f"  database:   {db['path']} ({'ok' if db.get('ok', True) else 'REFUSING WRITES'}, WAL {db.get('walBytes', 0)} bytes)")
    if db.get("problem"):
        click.echo(f"  problem:    {db['problem']['message']}")
        click.echo(f"  to fix:     {db['problem'].get('hint', '')}")
    elif db["integrity"] != "ok":
        click.echo(f"  integrity:  {db['integrity']}")
    click.echo(f"  plugins:    {', '.join(h['plugins']['loaded']) or 'none'}")
    for name, reason in h["plugins"]["failed"].items():
        click.echo(f"  BROKEN plugin {name}: {reason} (AGENT_LINK_DISABLE_PLUGINS={name} silences it)")
    for problem in h["plugins"].get("problems", []):
        if not problem["disabled"]:
            click.echo(f"  plugin problem: {problem['plugin']}: {problem['hook']}: {problem['error']} ({problem['count']}x)")
            click.echo(f"    {problem['fix']}")
    for problem in h["plugins"].get("elsewhere", []):
        click.echo(f"  plugin problem in process {problem['pid']}: {problem['plugin']}: {problem['hook']}: {problem['error']}")
        click.echo(f"    {problem['fix']}")
    for dep in h["env"]["deprecated"]:
        click.echo(f"  deprecated variable {dep['name']}: use {dep['canonical']}")
    for c in h["env"]["conflicts"]:
        click.echo(f"  conflict: {c['ignored']} ignored, {c['winner']} wins")
    for w in h["reminders"]["warnings"]:
        click.echo(f"  warning: {w['message']}")
    click.echo(f"  reminders:  limit {h['reminders']['limit']}, every {h['reminders']['intervalMs']} ms")
    legacy = (h.get("sections") or {}).get("legacyState") or {}  # the legacy plugin's section
    if legacy.get("files"):
        click.echo(f"  original's files: {len(legacy['files'])}, {legacy.get('pending', 0)} not imported"
                   + (f" ({legacy['hint']})" if legacy.get("hint") else ""))


def interrupted(command: str | None = None) -> NoReturn:
    """End a command stopped by Ctrl-C: one stderr line, exit 130 (what a shell reports for
    SIGINT), as the waiting commands do. Click's own handling would print "Aborted!" and exit 1.

    :param command: the command's path after ``agent-link`` (``send``, ``install <host>``), if known.
    """
    where = f"agent-link {command}" if command else "agent-link"
    click.echo(f"{where}: stopped by Ctrl-C (what it had finished stays done).", err=True)
    sys.exit(130)


class AgentLinkGroup(click.Group):
    """Root group: loads plugin commands lazily, the first time a command is looked up."""

    _plugins_loaded = False

    def invoke(self, ctx: click.Context) -> Any:
        """Run the command; Ctrl-C ends it with :func:`interrupted` (the waiting commands say
        more themselves, as they catch it first)."""
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            interrupted(ctx.invoked_subcommand)

    def _load_plugin_commands(self, ctx: click.Context, for_health: bool = False, stateless: bool = False) -> None:
        if self._plugins_loaded:
            return
        self._plugins_loaded = True
        try:
            (plugin_hooks(ctx) if stateless else open_app(ctx).hooks).register_commands(self)
        except AgentLinkError as exc:
            if not for_health:  # health (a core command) reports a state that does not open itself
                fail(exc)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        # Plugins may also add options to core commands (e.g. a harness's endpoint choice),
        # so they load for every command but the two that must start fast on their own.
        if cmd_name == "health":  # health reports what it can read in a state dir it cannot write
            ctx.find_root().meta["read_only_ok"] = True
        if cmd_name not in self.commands or cmd_name not in ("mcp", "hook"):
            self._load_plugin_commands(ctx, for_health=cmd_name == "health", stateless=cmd_name in STATELESS_COMMANDS)
        command = super().get_command(ctx, cmd_name)
        if command is not None and getattr(command.callback, "__agent_link_sender_options__", False):
            _add_sender_options(command, get_app(ctx))
        return command

    def list_commands(self, ctx: click.Context) -> list[str]:
        self._load_plugin_commands(ctx)
        return super().list_commands(ctx)


def sender_options(app: App) -> list[Any]:
    """The sender options (:class:`~agent_link_core.harness.SenderOption`) of every harness,
    one per flag (the first harness by name declaring a flag defines it)."""
    seen: dict[str, Any] = {}
    for _, harness in sorted(app.harnesses.declared().items()):  # declared: no harness is built for its flags
        for option in harness.sender_options:
            seen.setdefault(option.flag, option)
    return list(seen.values())


def option_param(flag: str) -> str:
    """The click parameter name of ``--a-flag`` (``a_flag``)."""
    return flag.lstrip("-").replace("-", "_")


def _add_sender_options(command: click.Command, app: App) -> None:
    """Give a sending command (send, reply, status, wait) the harnesses' sender options."""
    present = {p.name for p in command.params}
    for option in sender_options(app):
        if option.param not in present:
            command.params.append(click.Option([option.flag], help=option.help))
            present.add(option.param)


def build_cli() -> click.Group:
    """A fresh root group with the core commands (plugins add theirs on first lookup)."""

    @click.group(cls=AgentLinkGroup, epilog=EXIT_HELP)
    @click.version_option(__version__, prog_name="agent-link")
    def cli() -> None:
        """agent-link: let AI coding agents on this machine find and message each other."""

    @cli.command(epilog=EXIT_HELP)
    @click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
    @click.option("--ndjson", is_flag=True, help="Print the same JSON object on one line.")
    @click.pass_context
    def health(ctx: click.Context, as_json: bool, ndjson: bool) -> None:
        """Show whether agent-link works here and what it sees (exit 1 when the database
        refuses writes: damaged, replaced, or a state dir this user cannot write)."""
        if as_json or ndjson:
            try:
                open_app(ctx)
            except AgentLinkError as exc:  # still one JSON object: health's answer is that agent-link cannot start here
                emit({"ok": False, "error": exc.to_dict()}, as_json, _print_health, ndjson)
                fail(exc)
        data = get_app(ctx).health()
        emit(data, as_json, _print_health, ndjson)
        if not data["database"].get("ok", True):
            sys.exit(1)

    @cli.command(epilog=EXIT_HELP)
    @click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
    @click.option("--ndjson", is_flag=True, help="Print the same JSON object on one line.")
    @click.pass_context
    def plugins(ctx: click.Context, as_json: bool, ndjson: bool) -> None:
        """List loaded, blocked and broken plugins (--json: with each plugin's hooks and the
        time each took in this process)."""
        app = get_app(ctx)
        app.hooks.tools()  # check every plugin's tools too: a refused one is a problem to show
        data = app.plugins_view()
        data["hooks"] = app.hooks.hook_view()

        def human(d: dict[str, Any]) -> None:
            for name in d["loaded"]:
                click.echo(f"{name} {d['versions'].get(name, '')}".rstrip())
            for name in d["blocked"]:
                click.echo(f"{name} (disabled by AGENT_LINK_DISABLE_PLUGINS)")
            for name, reason in d["failed"].items():
                click.echo(f"{name} BROKEN: {reason}")
                click.echo(f"  turn it off: AGENT_LINK_DISABLE_PLUGINS={name}")
            for problem in d["problems"]:
                if not problem["disabled"]:
                    click.echo(f"{problem['plugin']} problem in {problem['hook']}: {problem['error']} ({problem['count']}x)")
                    click.echo(f"  {problem['fix']}")
            for problem in d["elsewhere"]:
                click.echo(f"{problem['plugin']} problem in {problem['hook']} (process {problem['pid']}): {problem['error']}")
                click.echo(f"  {problem['fix']}")
            if not any(d[k] for k in ("loaded", "blocked", "failed")):
                click.echo("no plugins installed")

        emit(data, as_json, human, ndjson)

    json_opt = click.option("--json", "as_json", is_flag=True, help="Print one JSON object (indented).")
    ndjson_opt = click.option("--ndjson", is_flag=True, help="Print the same JSON object on one line.")
    def with_from(f: Any) -> Any:
        """``--from ADDRESS``, plus the sender options the installed harnesses declare
        (added when the command is looked up: :meth:`AgentLinkGroup.get_command`)."""
        f = click.option("--from", "from_address", help="Act as this address (unverified).")(f)
        f.__agent_link_sender_options__ = True
        return f

    def with_reader_from(f: Any) -> Any:
        """``--from ADDRESS`` for a command that shows mail: the address must be proved, as
        for ``--as`` (the help says so; :func:`who_am_i` with ``reading``)."""
        f = click.option("--from", "from_address",
                         help="Read as this address: only inside that address's own session (its AGENT_LINK_ADDRESS), "
                              "or where the machine's user set AGENT_LINK_INSPECT_ALL=1.")(f)
        f.__agent_link_sender_options__ = True
        return f

    def who_am_i(app: App, from_address: str | None, named: dict[str, Any], *, reading: bool = False) -> Any:
        """The caller a command acts as: ``--from`` / a harness's sender options, else the
        current session. With ``reading`` (the command shows mail) the reader, named or not,
        must be proved, as ``--as`` is (:func:`agent_link_core.identity.prove_reader`)."""
        from agent_link_core import api

        if from_address is not None and not from_address.strip():
            raise click.UsageError("--from is empty: give an address such as team:alice, or leave the option out")

        given: dict[str, str] = {}
        for option in sender_options(app):
            value = named.get(option.param)
            if value is None:
                continue
            if option.requires and named.get(option_param(option.requires)) is None:
                raise click.UsageError(f"{option.flag} needs {option.requires}")
            given[option.key] = value
        try:
            me = api.sender(app, explicit=from_address, named=given or None)
        except AgentLinkError as exc:
            fail(exc)
        if reading and me.known:  # named or not, the reader must be proved (identity.prove_reader)
            from agent_link_core.identity import prove_reader, reader_proved_here

            if not reader_proved_here(app, me.address):
                run_async(prove_reader(app, me.address))  # refused: one line, exit 1
        return me

    def as_caller(app: App, as_address: str | None) -> Any:
        """The reader of a command that shows mail: ``--as ADDRESS`` (checked) or the current
        session, proved either way (:func:`agent_link_core.identity.prove_reader`: only that
        address itself or a process with ``AGENT_LINK_INSPECT_ALL`` reads as it; a one-line
        error and exit otherwise)."""
        from agent_link_core.cli_text import address_error
        from agent_link_core.identity import prove_reader, reader_proved_here
        from agent_link_core.model import Caller, address_scheme

        if as_address is None:
            me = app.caller()
            address = me.address if me.known else None
        else:
            problem = address_error(as_address, "as")
            if problem is not None:
                fail(problem)
            me, address = Caller(as_address, "cli", address_scheme(as_address)), as_address
        if address is not None and not reader_proved_here(app, address):
            run_async(prove_reader(app, address))  # refused: one line, exit 1
        return me

    def print_messages(app: App, views: list[dict[str, Any]], show_envelope: bool) -> None:
        """Messages for people (header, then the terminal-safe body), or their envelopes."""
        from agent_link_core.cli_text import message_lines

        rows = {row["id"]: row for row in app.mailbox.rows([view["id"] for view in views])}  # one query, not one per message
        for view in views:
            row = rows[view["id"]]
            if show_envelope:  # the envelope the read already rendered (conversation, wait), else rendered now
                click.echo(view.get("envelope") or app.mailbox.envelope(row))
            else:
                click.echo("\n".join(message_lines(view, row["body"])))

    def shown_unread(app: App, data: dict[str, Any]) -> list[str]:
        """Ids of the unread messages an inbox read shows whole (a paged message: only with its
        last page), which the read marks delivered once its output is written."""
        page = data.get("page")
        if page is not None:
            row = app.mailbox.get_row(page["messageId"])
            return [row["id"]] if page["nextOffset"] is None and row is not None and row["delivered_at"] is None else []
        return [m["id"] for m in data["messages"] if m.get("deliveredAt") is None]

    def as_read(app: App, data: dict[str, Any], ids: list[str]) -> dict[str, Any]:
        """An inbox read made without marking, shown as it stands once ``ids`` are marked
        delivered by it: their views, ``markedDelivered``, the open and remaining counts."""
        from agent_link_core.store import now_ms

        data = {**data, "markedDelivered": list(ids)}
        if not ids:
            return data
        at, marked = now_ms(), set(ids)
        views = []
        for view in data["messages"]:
            if view["id"] in marked:
                row = dict(app.mailbox.stored(view["id"]))
                row.update(delivered_at=at, first_delivered_at=row["first_delivered_at"] or at, delivered_via="inbox")
                state = app.mailbox.state(row)  # type: ignore[arg-type]
                fresh = app.mailbox.to_view(row, state)  # type: ignore[arg-type]
                if "open" in view:
                    fresh["open"] = state.status in ("pending", "unresolved", "expired") if row["anticipation"] != "fyi" else False
                view = {**view, **fresh}
            views.append(view)
        data["messages"] = views
        if "openCount" in data:
            data["openCount"] = sum(1 for v in views if v.get("open"))
        if data.get("page") is None and "remainingCount" in data:
            data["remainingCount"] = max(data["remainingCount"] - len(ids), 0)
            if "more" in data:
                left = data["remainingCount"]
                data["more"] = f"{left} more message(s) wait: call read_agent_link_inbox again to read them." if left else None
        return data

    envelope_opt = click.option("--envelope", "show_envelope", is_flag=True,
                                help="Print each message inside its <agent-link-message> envelope (what a model sees).")

    @cli.command(epilog=EXIT_HELP)
    @click.option("--as", "as_address", help="Read the mailbox of this address (default: the current session).")
    @click.option("--limit", type=WholeRange(1, 100), default=20, show_default=True)
    @click.option("--peek", is_flag=True, help="Do not mark the messages delivered.")
    @click.option("--all", "all_mail", is_flag=True, help="Also list messages already read or resolved (newest first).")
    @click.option("--message-id", "message_id", help="Read this one message in pages (one too large for one read).")
    @click.option("--offset", type=WholeRange(0, 1_000_000), help="With --message-id: where the page starts (characters).")
    @envelope_opt
    @json_opt
    @ndjson_opt
    @click.pass_context
    def inbox(ctx: click.Context, as_address: str | None, limit: int, peek: bool, all_mail: bool, message_id: str | None,
              offset: int | None, show_envelope: bool, as_json: bool, ndjson: bool) -> None:
        """Read the messages other agents sent to this session (open ones; --all: every one).

        One read returns what fits AGENT_LINK_READ_BYTES (or the calling host's own limit);
        a message larger than that comes in pages: follow the printed --offset.
        """
        from agent_link_core import budget
        from agent_link_core.cli_text import terminal_safe

        if offset is not None and message_id is None:
            raise click.UsageError("--offset needs --message-id")
        if message_id is not None and all_mail:
            raise click.UsageError("choose one of --message-id and --all")
        app = get_app(ctx)
        caller = as_caller(app, as_address)
        # Read without marking, print, and mark only what the output showed once it was
        # written: mail whose output never reached its reader stays unread.
        try:
            app.require_caller(caller)
            mark, warnings = app.begin_inbox_read(caller, not peek)
            if all_mail:
                data = app.inbox(caller, limit=limit, mark=False)
                rows = app.store.conn.execute(
                    "SELECT * FROM messages WHERE recipient = ? ORDER BY sent_at DESC, id DESC LIMIT ?", (caller.address, limit)
                ).fetchall()
                data["messages"] = app.mailbox.to_views(rows)
                data["renderedBlock"] = "\n".join(app.mailbox.envelope(r) for r in rows)
            else:
                data = budget.inbox(app, caller, budget.caller_budget(app, caller), limit=limit, mark=False,
                                    include_open=True, message_id=message_id, offset=offset or 0)
            if warnings:
                data["warnings"] = warnings
            to_mark = shown_unread(app, data) if mark else []
            data = as_read(app, data, to_mark)
        except AgentLinkError as exc:
            fail(exc)

        def human(d: dict[str, Any]) -> None:
            page = d.get("page")
            if page is not None:  # one message too large for one read: a part of its envelope
                end = page["nextOffset"] if page["nextOffset"] is not None else page["totalChars"]
                click.echo(f"message {page['messageId']}, characters {page['offset']}-{end} of {page['totalChars']} of its envelope:")
                click.echo(terminal_safe(d["renderedBlock"]))
                if page["nextOffset"] is not None:
                    who = f" --as {d['address']}" if as_address else ""
                    click.echo(f"Read on with: agent-link inbox{who} --message-id {page['messageId']} --offset {page['nextOffset']}")
                return
            if not d["messages"]:
                click.echo(f"No {'' if all_mail else 'open '}messages for {d['address']}.")
                return
            print_messages(app, d["messages"], show_envelope)
            if d.get("more"):
                click.echo(f"{d['remainingCount']} more message(s) wait: run agent-link inbox again.")
            click.echo("Answer one with: agent-link reply MESSAGE_ID TEXT [--decline | --done]")

        def mark_shown() -> None:
            try:
                for mid in to_mark:
                    app.mailbox.mark_delivered(mid, "inbox")
            except AgentLinkError as exc:
                fail(exc)

        show_then_mark(lambda: emit(data, as_json, human, ndjson), mark_shown, "nothing was marked read")

    @cli.command(epilog=EXIT_HELP)
    @click.option("--search", help="Only sessions matching these words (title, id, folder).")
    @click.option("--cwd", type=click.Path(file_okay=False), help="Only sessions working in this directory.")
    @click.option("--harness", help="Only this harness (e.g. one of the installed plugins).")
    @click.option("--limit", type=WholeRange(1, 500), default=50, show_default=True)
    @click.option("--source", help="Only sessions of this source kind (e.g. how a thread was started: cli, exec, subAgent...).")
    @click.option("--show-paths", is_flag=True, help="Show full working directories.")
    @click.option("--cursor", help="The page after an earlier answer (its nextCursor).")
    @json_opt
    @ndjson_opt
    @click.pass_context
    def sessions(ctx: click.Context, source: str | None, search: str | None, cwd: str | None, harness: str | None, limit: int,
                 show_paths: bool, cursor: str | None, as_json: bool, ndjson: bool) -> None:
        """List every agent session on this machine, newest first."""
        import os

        from agent_link_core import api

        app = get_app(ctx)
        try:
            data = run_async(api.list_sessions(app, search=search, cwd=os.path.abspath(cwd) if cwd else None,
                                               harness=harness or "all", limit=limit, show_paths=show_paths, source=source,
                                               cursor=cursor))
        except AgentLinkError as exc:
            fail(exc)

        def human(d: dict[str, Any]) -> None:
            if d["sessions"]:
                elsewhere = machine_column(d["sessions"])
                table(["ADDRESS", "TITLE", "FOLDER", "LAST ACTIVE", "LOADED"] + (["MACHINE"] if elsewhere else []),
                      [[s["address"], (s.get("title") or "")[:60], s.get("cwd"), s.get("lastActivityAt"),
                        {True: "yes", False: "no"}.get(s.get("loaded"), "?")] + ([m] if elsewhere else [])
                       for s, m in zip(d["sessions"], elsewhere or d["sessions"])])
            else:
                click.echo("No sessions found.")
            left = {k: v for k, v in d["filteredOut"].items() if v}
            if left:
                click.echo("left out: " + ", ".join(f"{v} by {k}" for k, v in left.items()))
            if d["nextCursor"]:
                click.echo(f"more: --cursor {d['nextCursor']}")

        provider_lines(data["providers"])
        emit(data, as_json, human, ndjson)

    def wait_all(app: App, caller: Any, message_id: str, timeout_ms: int) -> dict[str, Any]:
        """Wait for a resolution for the whole ``timeout_ms``: one App.wait call stops at
        its per-call cap, so the CLI keeps calling until the answer or the deadline."""
        import time

        deadline = time.monotonic() + timeout_ms / 1000
        while True:
            left = max(0, int((deadline - time.monotonic()) * 1000))
            data = run_async(app.wait(caller=caller, agent=message_id, reply_to=message_id, timeout_ms=left, mark=False))
            data["warnings"] = [w for w in data.get("warnings", []) if w.get("code") != "wait_capped"]
            if not data["warnings"]:
                del data["warnings"]
            if data["outcome"] != "timeout" or time.monotonic() >= deadline:
                data["waitedMs"] = timeout_ms - left + data["waitedMs"]
                return data

    def mark_reply(app: App, me: Any, data: dict[str, Any]) -> None:
        """Mark the reply a wait returned delivered (:meth:`App.mark_taken`), once it was shown."""
        if data.get("reply"):
            try:
                app.mark_taken(me, data["reply"]["id"])
            except AgentLinkError as exc:
                fail(exc)

    def print_wait(app: App, d: dict[str, Any], show_envelope: bool) -> None:
        click.echo(f"{d['outcome']} after {d['waitedMs']} ms")
        if d.get("reply"):
            print_messages(app, [d["reply"]], show_envelope)

    def message_text(text: str | None, file: str | None) -> str:
        from agent_link_core.cli_text import read_body

        try:
            return read_body(text, file, sys.stdin.buffer)
        except AgentLinkError as exc:
            fail(exc)

    @cli.command(epilog=EXIT_HELP)
    @click.argument("target")
    @click.argument("text", required=False)
    @click.option("--file", "file", type=click.Path(dir_okay=False), help="Read the text from this file (at most 64 KiB).")
    @click.option("--message-id", help="A ULID or UUID making retries idempotent (same id + same message = no resend).")
    @click.option("--ttl-ms", type=WholeRange(1, None), help="Give up pushing this long after the first attempt.")
    @click.option("--reply-by", help="Deadline for an answer (ISO 8601 with a zone); implies --anticipation reply.")
    @click.option("--anticipation", type=click.Choice(["reply", "action", "fyi"]))
    @click.option("--wait", "wait_reply", is_flag=True, help="Wait for the recipient's resolution (implies reply).")
    @click.option("--timeout-ms", type=WholeRange(0, 600000), default=60000, show_default=True, help="With --wait (at most 600000).")
    @click.option("--retry-count", type=WholeRange(0, 20), default=0, show_default=True)
    @click.option("--retry-delay-ms", type=WholeRange(0, 60000), default=500, show_default=True)
    @click.option("--retry-backoff", type=FiniteRange(1.0, 10.0), default=2.0, show_default=True)
    @click.option("--retry-jitter", type=FiniteRange(0.0, 1.0), default=0.1, show_default=True)
    @click.option("--retry-unknown", is_flag=True, help="Push again a message whose earlier outcome was unknown.")
    @click.option("--require-known", is_flag=True, help="Refuse an address no process has ever served (typo guard).")
    @click.option("--require-delivered", is_flag=True, help=f"Exit {EXIT_UNDELIVERED} unless the outcome is delivered.")
    @click.option("--correlation-id", help="Your id tying this message to others (stored, part of the idempotency check).")
    @click.option("--from-project", help="The sender's project name (stored with the message).")
    @click.option("--label", "sender_label", help="A label for the sender, e.g. its role (stored with the message).")
    @click.option("--envelope", "envelope_format", type=click.Choice(["agent-link", "intercom-v2"]), default="agent-link",
                  show_default=True, help="What the recipient's model reads: agent-link's envelope, or agent-session-intercom's v2"
                  " text (for harnesses that support it).")
    @with_from
    @json_opt
    @ndjson_opt
    @click.pass_context
    def send(ctx: click.Context, target: str, text: str | None, file: str | None, message_id: str | None, ttl_ms: int | None,
             reply_by: str | None, anticipation: str | None, wait_reply: bool, timeout_ms: int, retry_count: int,
             retry_delay_ms: int, retry_backoff: float, retry_jitter: float, retry_unknown: bool, require_known: bool,
             require_delivered: bool, correlation_id: str | None, from_project: str | None, sender_label: str | None,
             envelope_format: str, from_address: str | None, as_json: bool, ndjson: bool, **named: Any) -> None:
        """Send TEXT to TARGET: a contact alias, an address (harness:id, role:name), a form a plugin
        understands (e.g. an endpoint composite), or a bare session id. TEXT `-` reads stdin.

        The outcome is exactly one of delivered, accepted (the host took it and shows it
        later; never pushed again), queued, rejected, unknown.
        """
        from agent_link_core import api
        from agent_link_core.cli_text import (
            address_error,
            cli_words,
            looks_like_bad_address,
        )
        from agent_link_core.mailbox import parse_iso_ms

        body = message_text(text, file)
        if not target.strip():
            raise click.UsageError("TARGET is empty: give an address, a contact alias or a session id")
        problem = address_error(target.strip(), "to") if looks_like_bad_address(target.strip()) else None
        if problem is not None:
            fail(problem)
        if reply_by is not None:
            try:
                parse_iso_ms(reply_by, "replyBy")  # the date's format is the first thing to get right
            except AgentLinkError as exc:
                fail(exc)
            if anticipation is None:
                anticipation = "reply"
        if wait_reply and anticipation == "fyi":
            raise click.UsageError("--wait expects an answer; it cannot go with --anticipation fyi")
        app = get_app(ctx)
        me = who_am_i(app, from_address, named, reading=wait_reply)  # --wait shows the answer: a read, checked before sending
        policy = api.RetryPolicy(retry_count, retry_delay_ms, retry_backoff, retry_jitter)
        if wait_reply and anticipation is None:
            anticipation = "reply"
        result = run_async(api.send_reliably(app, target, body, sender=me, message_id=message_id, ttl_ms=ttl_ms,
                                             reply_by=reply_by, anticipation=anticipation, retry=policy,
                                             retry_unknown=retry_unknown, require_known=require_known,
                                             correlation_id=correlation_id, sender_project=from_project,
                                             sender_label=sender_label,
                                             envelope_format=None if envelope_format == "agent-link" else envelope_format),
                           inline=api.awaits_nothing(app, target.strip(), me))
        data = result.to_dict()
        if wait_reply and result.outcome in ("delivered", "accepted", "queued") and result.message_id:
            try:
                click.echo(f"{result.outcome}: {result.message_id}; waiting up to {timeout_ms / 1000:g} s for the answer "
                           "(Ctrl-C stops waiting)", err=True)
                data["wait"] = wait_all(app, me, result.message_id, timeout_ms)
            except KeyboardInterrupt:  # the message is sent: its id must not be lost with the wait
                click.echo(f"{result.outcome}: {result.message_id} to {data['to'] or target} "
                           f"(stopped waiting; `agent-link wait {result.message_id}` waits again)", err=True)
                sys.exit(130)

        def human(d: dict[str, Any]) -> None:
            line = f"{d['outcome']}: {d['messageId'] or '-'} to {d['to'] or target}"
            click.echo(line + (" (already sent; nothing resent)" if d["duplicate"] else ""))
            if d.get("error"):
                click.echo(f"agent-link: {cli_words(d['error']['message'], 'send')} {cli_words(d['error'].get('hint') or '', 'send')}".rstrip(), err=True)
            for w in d.get("warnings", []):
                click.echo(f"warning: {cli_words(w['message'], 'send')}", err=True)
            if "wait" in d:
                print_wait(app, d["wait"], False)

        if (as_json or ndjson) and data.get("warnings"):
            for w in data["warnings"]:  # scripts read stdout; people still see warnings
                click.echo(f"warning: {cli_words(w['message'], 'send')}", err=True)
        show_then_mark(lambda: emit(data, as_json, human, ndjson), lambda: mark_reply(app, me, data.get("wait") or {}),
                       "the reply stays unread")
        if "wait" in data and data["wait"]["outcome"] == "timeout":
            sys.exit(EXIT_TIMEOUT)
        if require_delivered and result.outcome in ("accepted", "queued"):
            sys.exit(EXIT_UNDELIVERED)
        sys.exit({"delivered": 0, "accepted": 0, "queued": 0, "unknown": EXIT_UNKNOWN}.get(result.outcome, 1))

    @cli.command(epilog=EXIT_HELP)
    @click.argument("message_id")
    @click.argument("text", required=False)
    @click.option("--file", "file", type=click.Path(dir_okay=False), help="Read the text from this file (at most 64 KiB).")
    @click.option("--decline", is_flag=True, help="Decline it; TEXT is the reason.")
    @click.option("--done", is_flag=True, help="Mark it done; TEXT is an optional note.")
    @click.option("--envelope", "envelope_format", type=click.Choice(["agent-link", "intercom-v2"]), default="agent-link",
                  show_default=True, help="What the original sender's model reads (intercom-v2: for harnesses that support it).")
    @with_from
    @json_opt
    @ndjson_opt
    @click.pass_context
    def reply(ctx: click.Context, message_id: str, text: str | None, file: str | None, decline: bool, done: bool,
              envelope_format: str, from_address: str | None, as_json: bool, ndjson: bool, **named: Any) -> None:
        """Answer MESSAGE_ID, a message addressed to the current session; the answer goes back
        to its sender. TEXT `-` reads stdin."""
        if decline and done:
            raise click.UsageError("choose one of --decline and --done")
        kind = "decline" if decline else ("done" if done else None)
        body = message_text(text, file) if (text is not None or file is not None) else None
        app = get_app(ctx)
        me = who_am_i(app, from_address, named)
        from agent_link_core import api

        data = run_async(api.reply(app, message_id, body, sender=me, kind=kind or "reply",
                                   envelope_format=None if envelope_format == "agent-link" else envelope_format))
        def human(d: dict[str, Any]) -> None:
            sent = f"reply {d['messageId']} {d['delivery']}" if d["messageId"] else "no reply message sent"
            click.echo(f"{d['resolution']['kind']}: {d['replyToMessageId']} ({d['status']}); {sent}")

        emit(data, as_json, human, ndjson)

    @cli.command(epilog=EXIT_HELP)
    @click.argument("message_id")
    @with_reader_from
    @json_opt
    @ndjson_opt
    @click.pass_context
    def status(ctx: click.Context, message_id: str, from_address: str | None, as_json: bool, ndjson: bool,
               **named: Any) -> None:
        """Show delivery, status and reminders of a message you sent or received."""
        app = get_app(ctx)
        me = who_am_i(app, from_address, named, reading=True)
        try:
            data = app.status(me, message_id)
            if data["delivery"] == "accepted" and run_async(app.refresh_delivery(data["messageId"])):
                data = app.status(me, message_id)
        except AgentLinkError as exc:
            fail(exc)
        emit(data, as_json, lambda d: click.echo(
            f"{d['messageId']}: {d.get('deliveryNote') or d['delivery']}, status {d['status'] or 'none (fyi)'}, from {d['from']} to {d['to']}"), ndjson)

    @cli.command(epilog=EXIT_HELP)
    @click.argument("message_id")
    @click.option("--timeout-ms", type=WholeRange(0, 600000), default=60000, show_default=True, help="At most 600000.")
    @with_reader_from
    @envelope_opt
    @json_opt
    @ndjson_opt
    @click.pass_context
    def wait(ctx: click.Context, message_id: str, timeout_ms: int, from_address: str | None, show_envelope: bool,
             as_json: bool, ndjson: bool, **named: Any) -> None:
        """Wait up to --timeout-ms for the resolution of MESSAGE_ID (exit 6 on timeout; Ctrl-C: 130)."""
        app = get_app(ctx)
        me = who_am_i(app, from_address, named, reading=True)
        data = wait_all(app, me, message_id, 0)  # a bad or unknown id is refused before any waiting
        if data["outcome"] == "timeout" and timeout_ms > 0:
            try:
                click.echo(f"waiting up to {timeout_ms / 1000:g} s for the answer to {message_id} (Ctrl-C stops waiting)",
                           err=True)
                data = wait_all(app, me, message_id, timeout_ms)
            except KeyboardInterrupt:
                click.echo(f"stopped waiting for {message_id}; `agent-link wait {message_id}` waits again", err=True)
                sys.exit(130)
        show_then_mark(lambda: emit(data, as_json, lambda d: print_wait(app, d, show_envelope), ndjson),
                       lambda: mark_reply(app, me, data), "the reply stays unread")
        if data["outcome"] == "timeout":
            sys.exit(EXIT_TIMEOUT)

    @cli.command(epilog=EXIT_HELP)
    @click.option("--as", "as_address", help="Follow the mail of this address (default: the current session).")
    @click.option("--interval-ms", type=WholeRange(100, 60000), default=1000, show_default=True,
                  help="How often to look again when no change wakes it (any agent-link write wakes it at once).")
    @envelope_opt
    @ndjson_opt
    @click.pass_context
    def watch(ctx: click.Context, as_address: str | None, interval_ms: int, show_envelope: bool, ndjson: bool) -> None:
        """Follow new mail to and from an address, and status changes, until interrupted (Ctrl-C).

        --ndjson prints one JSON event per line: first {"version", "event": "watching", "address"},
        then {"version", "event": "message"|"change", "message"}.
        Watching reads nothing: no message is marked delivered."""
        app = get_app(ctx)
        caller = as_caller(app, as_address)
        try:
            app.require_caller(caller)
        except AgentLinkError as exc:
            fail(exc)
        seen: dict[str, tuple[Any, ...]] = {}
        first = True
        where, params = app.mailbox.visible_to(caller.address).sql("messages")  # the one read rule
        from agent_link_core.wake import Wakeup

        wakeup = Wakeup(app.store.path)  # armed before the first read: no commit after it goes unseen
        try:
            while True:
                rows = app.store.conn.execute(f"SELECT * FROM messages WHERE {where} ORDER BY sent_at, id", params).fetchall()
                for row, view in zip(rows, app.mailbox.to_views(rows), strict=True):  # states read together
                    key = (view["delivery"], view["status"], view["to"])
                    before = seen.get(row["id"])
                    seen[row["id"]] = key
                    if first or before == key:  # what was there when watching began is not news
                        continue
                    event = "message" if before is None else "change"
                    if ndjson:
                        click.echo(json.dumps({"version": JSON_FORMAT_VERSION, "event": event, "message": view},
                                              ensure_ascii=False, separators=(",", ":")))
                    elif event == "message":
                        print_messages(app, [view], show_envelope)
                    else:
                        click.echo(f"{view['id']}: now {view['status'] or 'fyi'} ({view['delivery']})\n")
                if first:  # said once the starting point is taken: anything after it is news
                    if ndjson:
                        click.echo(json.dumps({"version": JSON_FORMAT_VERSION, "event": "watching", "address": caller.address},
                                              ensure_ascii=False, separators=(",", ":")))
                    else:
                        click.echo(f"Watching mail of {caller.address} (Ctrl-C stops).")
                first = False
                wakeup.wait_blocking(interval_ms / 1000)  # a commit anywhere wakes it; the interval is the fallback
        except KeyboardInterrupt:  # the normal way to stop watching
            return
        finally:
            wakeup.close()

    @cli.command(epilog=EXIT_HELP)
    @click.option("--source", help="Only sessions of this source kind (e.g. how a thread was started: cli, exec, subAgent...).")
    @json_opt
    @ndjson_opt
    @click.pass_context
    def who(ctx: click.Context, source: str | None, as_json: bool, ndjson: bool) -> None:
        """Live sessions merged with your contacts."""
        from agent_link_core import api

        data = run_async(api.who(get_app(ctx), source=source))

        def human(d: dict[str, Any]) -> None:
            elsewhere = machine_column(d["sessions"])
            extra = [""] if elsewhere else []
            table(["ALIAS", "ADDRESS", "TITLE", "FOLDER"] + (["MACHINE"] if elsewhere else []),
                  [[s.get("alias"), s["address"], (s.get("title") or "")[:60], s.get("cwd")] + ([m] if elsewhere else [])
                   for s, m in zip(d["sessions"], elsewhere or d["sessions"])]
                  + [[c["alias"], c["address"], "(not seen now)", c.get("project")] + extra for c in d["offlineContacts"]])

        provider_lines(data["providers"])
        emit(data, as_json, human, ndjson)

    @cli.command(epilog=EXIT_HELP)
    @click.argument("query")
    @click.option("--source", help="Only sessions of this source kind (e.g. how a thread was started: cli, exec, subAgent...).")
    @click.option("--show-paths", is_flag=True, help="Show full working directories.")
    @json_opt
    @ndjson_opt
    @click.pass_context
    def find(ctx: click.Context, query: str, source: str | None, show_paths: bool, as_json: bool, ndjson: bool) -> None:
        """Find an agent by alias, project, title or id: answers none, one or many."""
        from agent_link_core import api

        if not query.strip():
            from agent_link_core.errors import invalid_arguments

            fail(invalid_arguments([{"path": "query", "rule": "minLength", "expected": "an alias, project, title or id to look for"}]))
        data = run_async(api.find(get_app(ctx), query, show_paths=show_paths, source=source))

        def human(d: dict[str, Any]) -> None:
            click.echo(d["verdict"])
            for m in d["matches"]:
                click.echo(f"  {m.get('alias') or '-'}  {m['address']}  {printable(m.get('title') or '')}".rstrip())

        emit(data, as_json, human, ndjson)
        sys.exit({"one": 0, "none": EXIT_NONE}.get(data["verdict"], EXIT_MANY))

    @cli.command(epilog=EXIT_HELP)
    @click.argument("message_id")
    @click.option("--thread", is_flag=True, help="Show the whole conversation: what it answers, replies, follow-ups.")
    @with_reader_from
    @envelope_opt
    @json_opt
    @ndjson_opt
    @click.pass_context
    def show(ctx: click.Context, message_id: str, thread: bool, from_address: str | None, show_envelope: bool,
             as_json: bool, ndjson: bool, **named: Any) -> None:
        """Show a message you sent or received, read or not (--thread: its conversation, oldest
        first); --envelope shows what a model sees."""
        app = get_app(ctx)
        me = who_am_i(app, from_address, named, reading=True)
        try:
            data = app.conversation(me, message_id)
        except AgentLinkError as exc:
            fail(exc)
        if not thread:
            data = {"message": next(m for m in data["messages"] if m["id"] == data["messageId"])}

        def human(d: dict[str, Any]) -> None:
            print_messages(app, d.get("messages") or [d["message"]], show_envelope)
            if d.get("hiddenCount"):
                click.echo(f"({d['hiddenCount']} messages of this conversation are not yours to see)")

        emit(data, as_json, human, ndjson)

    @cli.group(epilog=EXIT_HELP)
    def contacts() -> None:
        """Short aliases for sessions (trimmed, lower case, unique, one per session)."""

    @contacts.command("add")
    @click.argument("alias")
    @click.argument("target")
    @json_opt
    @ndjson_opt
    @click.pass_context
    def contacts_add(ctx: click.Context, alias: str, target: str, as_json: bool, ndjson: bool) -> None:
        """Bind ALIAS to TARGET (an address, or any form `send` accepts)."""
        from agent_link_core import api

        app = get_app(ctx)
        address = run_async(api.resolve_target(app, target, app.caller()))
        try:
            data = api.add_contact(app, alias, address)
        except AgentLinkError as exc:
            fail(exc)
        emit(data, as_json, lambda d: click.echo(f"{d['alias']} -> {d['address']}"), ndjson)

    @contacts.command("rename")
    @click.argument("old")
    @click.argument("new")
    @json_opt
    @ndjson_opt
    @click.pass_context
    def contacts_rename(ctx: click.Context, old: str, new: str, as_json: bool, ndjson: bool) -> None:
        """Rename alias OLD to NEW."""
        from agent_link_core import api

        try:
            data = api.rename_contact(get_app(ctx), old, new)
        except AgentLinkError as exc:
            fail(exc)
        emit(data, as_json, lambda d: click.echo(f"{d['alias']} -> {d['address']}"), ndjson)

    @contacts.command("remove")
    @click.argument("alias")
    @json_opt
    @ndjson_opt
    @click.pass_context
    def contacts_remove(ctx: click.Context, alias: str, as_json: bool, ndjson: bool) -> None:
        """Forget ALIAS."""
        from agent_link_core import api

        try:
            data = api.remove_contact(get_app(ctx), alias)
        except AgentLinkError as exc:
            fail(exc)
        emit(data, as_json, lambda d: click.echo(f"removed {d['alias']} ({d['address']})"), ndjson)

    @contacts.command("list")
    @json_opt
    @ndjson_opt
    @click.pass_context
    def contacts_list(ctx: click.Context, as_json: bool, ndjson: bool) -> None:
        """List contacts."""
        from agent_link_core import api

        data = {"version": 1, "contacts": api.list_contacts(get_app(ctx))}
        emit(data, as_json, lambda d: table(["ALIAS", "ADDRESS", "PROJECT", "LAST SEEN"],
                                            [[c["alias"], c["address"], c["project"], c["lastSeen"]] for c in d["contacts"]]), ndjson)

    @cli.command(epilog=EXIT_HELP)
    def mcp() -> None:
        """Serve the agent-link MCP tools over stdio (hosts start this)."""
        from agent_link_core.server import main as serve_main

        try:
            serve_main()
        except AgentLinkError as exc:
            fail(exc)

    @cli.command(context_settings={"ignore_unknown_options": True}, epilog=EXIT_HELP)
    @click.argument("host")
    @click.argument("event")
    def hook(host: str, event: str) -> None:
        """Run a host hook: reads the host's hook JSON on stdin, prints the host's hook JSON.

        Always exits 0, so a failing hook never blocks a prompt.
        """
        from agent_link_core.hook import main as hook_main

        sys.exit(hook_main([host, event]))

    return cli


def main() -> None:
    """Entry point of the ``agent-link`` command (everything but the hook fast path)."""
    import sqlite3

    try:
        build_cli()(prog_name="agent-link")
    except KeyboardInterrupt:  # before or after a command ran (starting up, parsing): no traceback for it
        interrupted()
    except OSError as exc:
        import errno

        # commands report their own file errors as messages: what reaches here with these is
        # stdout failing (a closed pipe, a full disk or quota)
        if exc.errno in (errno.EPIPE, errno.ENOSPC, errno.EFBIG, errno.EDQUOT, errno.EIO):
            output_lost(exc)
        raise_internal(exc)
    except AgentLinkError as exc:  # raised outside a command's own handling (who is calling; a write the store refused)
        fail(exc)
    except sqlite3.DatabaseError as exc:
        from agent_link_core.config import load_config
        from agent_link_core.store import database_error, is_corruption, record_damage

        try:
            path = load_config().db_path
        except AgentLinkError:
            path = "agent-link.db"
        if is_corruption(exc):
            record_damage(path, None, str(exc))
        fail(database_error(path, exc))
    except Exception as exc:  # a bug must still read as one line, not a traceback
        raise_internal(exc)


def raise_internal(exc: BaseException) -> NoReturn:
    """Report an unexpected exception as one ``internal_error`` line (the traceback goes to the log)."""
    import logging

    logging.getLogger(__name__).exception("agent-link failed", exc_info=exc)
    fail(AgentLinkError("internal_error", f"agent-link failed unexpectedly ({type(exc).__name__}).",
                        {"cause": type(exc).__name__},
                        hint="Rerun with AGENT_LINK_DEBUG=1 (the log names the cause) and report it."))
