"""The ``agent-link`` command line for people and scripts.

Exit codes: 0 success; 1 agent-link refused or failed (the message on stderr says what and
what to do); 2 bad usage. ``--json`` prints one JSON object on stdout for scripts.
Plugins add commands through ``agent_link_register_commands``; the group is built lazily
from the plugin manager, never mutated at import time.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from agent_link_core import __version__
from agent_link_core.app import App
from agent_link_core.errors import AgentLinkError

EXIT_HELP = """\b
Exit codes:
  0  success (send: delivered, accepted or queued; find: exactly one match)
  1  agent-link refused or failed (stderr says why and what to do); send: rejected
  2  bad usage (unknown option, missing argument)
  3  send: outcome unknown (not resent; see --retry-unknown)
  4  find: no match
  5  find: several matches"""
EXIT_UNKNOWN, EXIT_NONE, EXIT_MANY = 3, 4, 5


def fail(exc: AgentLinkError) -> None:
    """Print an AgentLinkError as one stderr line (plus its hint) and exit: 2 for bad
    arguments (usage), 1 for everything else (a bad setting included)."""
    line = f"agent-link: {exc.message}"
    if exc.hint:
        line += f" {exc.hint}"
    click.echo(line, err=True)
    paths = [e.get("path", "") for e in exc.details.get("errors", [])] if exc.code == "invalid_arguments" else []
    sys.exit(2 if paths and not any(p.startswith("env.") for p in paths) else 1)


def get_app(ctx: click.Context) -> App:
    """The App for this invocation, created on first use and closed at exit."""
    root = ctx.find_root()
    if "app" not in root.meta:
        try:
            root.meta["app"] = App.create()
        except AgentLinkError as exc:
            fail(exc)
        root.call_on_close(root.meta["app"].close)
    return root.meta["app"]


def emit(data: Any, as_json: bool, human: Any, ndjson: bool = False) -> None:
    """Print ``data`` as JSON (``--json`` indented, ``--ndjson`` one line) or call ``human(data)``."""
    if ndjson:
        click.echo(json.dumps(data, ensure_ascii=False, separators=(",", ":")))
    elif as_json:
        click.echo(json.dumps(data, ensure_ascii=False, indent=2))
    else:
        human(data)


def run_async(coro: Any) -> Any:
    """Run a coroutine of the typed API, turning an AgentLinkError into a one-line exit 1."""
    import asyncio

    try:
        return asyncio.run(coro)
    except AgentLinkError as exc:
        fail(exc)


def printable(value: Any) -> str:
    """A cell for a terminal: control, format and bidi characters (which could drive the
    terminal or disguise text) become visible escapes."""
    import unicodedata

    text = "" if value is None else str(value)
    return "".join(c if unicodedata.category(c)[0] != "C" else f"\\u{{{ord(c):04X}}}" for c in text)


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
    if h["stateDir"]["exists"] and not h["stateDir"]["private"]:
        click.echo("  warning: other users can open the state dir; agent-link leaves existing dirs as they are")
    settings = h.get("settings") or {}
    click.echo(f"  settings:   {settings.get('file')}"
               + "".join(f"\n    {n} from {src}" for n, src in (settings.get("sources") or {}).items()))
    for other in settings.get("otherStateDirs") or []:
        click.echo(f"  warning: another agent-link process recently used the state dir {other['path']}: a separate mailbox"
                   " (set AGENT_LINK_STATE_DIR alike everywhere: `agent-link config set state_dir ...`)")
    if h["database"]["integrity"] != "ok":
        click.echo(f"  DAMAGED database: {h['database']['integrity']} (move it aside to start afresh)")
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


class AgentLinkGroup(click.Group):
    """Root group: loads plugin commands lazily, the first time a command is looked up."""

    _plugins_loaded = False

    def _load_plugin_commands(self, ctx: click.Context) -> None:
        if self._plugins_loaded:
            return
        self._plugins_loaded = True
        try:
            get_app(ctx).hooks.register_commands(self)
        except AgentLinkError as exc:
            fail(exc)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands:
            self._load_plugin_commands(ctx)
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
    for _, harness in sorted(app.harnesses.items()):
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
    @click.pass_context
    def health(ctx: click.Context, as_json: bool) -> None:
        """Show whether agent-link works here and what it sees."""
        emit(get_app(ctx).health(), as_json, _print_health)

    @cli.command(epilog=EXIT_HELP)
    @click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
    @click.pass_context
    def plugins(ctx: click.Context, as_json: bool) -> None:
        """List loaded, blocked and broken plugins."""
        app = get_app(ctx)
        app.hooks.tools()  # check every plugin's tools too: a refused one is a problem to show
        data = app.plugins_view()

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

        emit(data, as_json, human)

    @cli.command(epilog=EXIT_HELP)
    @click.option("--as", "as_address", help="Read the mailbox of this address (default: the current session).")
    @click.option("--limit", type=click.IntRange(1, 100), default=20, show_default=True)
    @click.option("--peek", is_flag=True, help="Do not mark the messages delivered.")
    @click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
    @click.pass_context
    def inbox(ctx: click.Context, as_address: str | None, limit: int, peek: bool, as_json: bool) -> None:
        """Read the messages other agents sent to this session."""
        from agent_link_core.model import Caller, address_scheme, is_address

        app = get_app(ctx)
        if as_address is not None:
            if not is_address(as_address):
                raise click.BadParameter("expected an address such as <harness>:<id>", param_hint="--as")
            caller = Caller(as_address, "cli", address_scheme(as_address))
        else:
            caller = app.caller()
        try:
            data = app.inbox(caller, limit=limit, mark=not peek)
        except AgentLinkError as exc:
            fail(exc)

        def human(d: dict[str, Any]) -> None:
            if not d["messages"]:
                click.echo(f"No open messages for {d['address']}.")
                return
            click.echo(d["renderedBlock"])
            click.echo("Answer one with: agent-link reply MESSAGE_ID TEXT [--decline | --done]")

        emit(data, as_json, human)

    json_opt = click.option("--json", "as_json", is_flag=True, help="Print one JSON object (indented).")
    ndjson_opt = click.option("--ndjson", is_flag=True, help="Print the same JSON object on one line.")
    def with_from(f: Any) -> Any:
        """``--from ADDRESS``, plus the sender options the installed harnesses declare
        (added when the command is looked up: :meth:`AgentLinkGroup.get_command`)."""
        f = click.option("--from", "from_address", help="Act as this address (unverified).")(f)
        f.__agent_link_sender_options__ = True
        return f

    def who_am_i(app: App, from_address: str | None, named: dict[str, Any]) -> Any:
        from agent_link_core import api

        given: dict[str, str] = {}
        for option in sender_options(app):
            value = named.get(option.param)
            if value is None:
                continue
            if option.requires and named.get(option_param(option.requires)) is None:
                raise click.UsageError(f"{option.flag} needs {option.requires}")
            given[option.key] = value
        try:
            return api.sender(app, explicit=from_address, named=given or None)
        except AgentLinkError as exc:
            fail(exc)

    @cli.command(epilog=EXIT_HELP)
    @click.option("--search", help="Only sessions matching these words (title, id, folder).")
    @click.option("--cwd", type=click.Path(file_okay=False), help="Only sessions working in this directory.")
    @click.option("--harness", help="Only this harness (e.g. one of the installed plugins).")
    @click.option("--limit", type=click.IntRange(1, 500), default=50, show_default=True)
    @click.option("--show-paths", is_flag=True, help="Show full working directories.")
    @json_opt
    @ndjson_opt
    @click.pass_context
    def sessions(ctx: click.Context, search: str | None, cwd: str | None, harness: str | None, limit: int,
                 show_paths: bool, as_json: bool, ndjson: bool) -> None:
        """List every agent session on this machine, newest first."""
        import os

        from agent_link_core import api

        app = get_app(ctx)
        data = run_async(api.list_sessions(app, search=search, cwd=os.path.abspath(cwd) if cwd else None,
                                           harness=harness or "all", limit=limit, show_paths=show_paths))

        def human(d: dict[str, Any]) -> None:
            if d["sessions"]:
                table(["ADDRESS", "TITLE", "FOLDER", "LAST ACTIVE", "LOADED"],
                      [[s["address"], (s.get("title") or "")[:60], s.get("cwd"), s.get("lastActivityAt"),
                        {True: "yes", False: "no"}.get(s.get("loaded"), "?")] for s in d["sessions"]])
            else:
                click.echo("No sessions found.")

        provider_lines(data["providers"])
        emit(data, as_json, human, ndjson)

    @cli.command(epilog=EXIT_HELP)
    @click.argument("target")
    @click.argument("text")
    @click.option("--message-id", help="A ULID making retries idempotent (same id + same text = no resend).")
    @click.option("--ttl-ms", type=click.IntRange(1, None), help="Give up pushing this long after the first attempt.")
    @click.option("--reply-by", help="Deadline for an answer (ISO 8601 with a zone).")
    @click.option("--anticipation", type=click.Choice(["reply", "action", "fyi"]))
    @click.option("--wait", "wait_reply", is_flag=True, help="Wait for the recipient's resolution (implies reply).")
    @click.option("--timeout-ms", type=click.IntRange(0, 600000), default=60000, show_default=True, help="With --wait.")
    @click.option("--retry-count", type=click.IntRange(0, 20), default=0, show_default=True)
    @click.option("--retry-delay-ms", type=click.IntRange(0, 60000), default=500, show_default=True)
    @click.option("--retry-backoff", type=click.FloatRange(1.0, 10.0), default=2.0, show_default=True)
    @click.option("--retry-jitter", type=click.FloatRange(0.0, 1.0), default=0.1, show_default=True)
    @click.option("--retry-unknown", is_flag=True, help="Push again a message whose earlier outcome was unknown.")
    @with_from
    @json_opt
    @ndjson_opt
    @click.pass_context
    def send(ctx: click.Context, target: str, text: str, message_id: str | None, ttl_ms: int | None, reply_by: str | None,
             anticipation: str | None, wait_reply: bool, timeout_ms: int, retry_count: int, retry_delay_ms: int,
             retry_backoff: float, retry_jitter: float, retry_unknown: bool, from_address: str | None,
             as_json: bool, ndjson: bool, **named: Any) -> None:
        """Send TEXT to TARGET: a contact alias, an address (harness:id, role:name), a form a plugin
        understands (e.g. an endpoint composite), or a bare session id.

        The outcome is exactly one of delivered, accepted (the host took it and shows it
        later; never pushed again), queued, rejected, unknown.
        """
        from agent_link_core import api

        app = get_app(ctx)
        me = who_am_i(app, from_address, named)
        policy = api.RetryPolicy(retry_count, retry_delay_ms, retry_backoff, retry_jitter)
        if wait_reply and anticipation == "fyi":
            raise click.UsageError("--wait expects an answer; it cannot go with --anticipation fyi")
        if wait_reply and anticipation is None:
            anticipation = "reply"
        result = run_async(api.send_reliably(app, target, text, sender=me, message_id=message_id, ttl_ms=ttl_ms,
                                             reply_by=reply_by, anticipation=anticipation, retry=policy,
                                             retry_unknown=retry_unknown))
        data = result.to_dict()
        if wait_reply and result.outcome in ("delivered", "accepted", "queued"):
            data["wait"] = run_async(app.wait(caller=me, agent=result.to, reply_to=result.message_id, timeout_ms=timeout_ms))

        def human(d: dict[str, Any]) -> None:
            line = f"{d['outcome']}: {d['messageId'] or '-'} to {d['to'] or target}"
            click.echo(line + (" (already sent; nothing resent)" if d["duplicate"] else ""))
            if d.get("error"):
                click.echo(f"agent-link: {d['error']['message']}", err=True)
            for w in d.get("warnings", []):
                click.echo(f"warning: {w['message']}", err=True)
            if "wait" in d:
                click.echo(f"wait: {d['wait']['outcome']}")
                if d["wait"].get("reply"):
                    click.echo(d["wait"]["reply"]["envelope"])

        emit(data, as_json, human, ndjson)
        sys.exit({"delivered": 0, "accepted": 0, "queued": 0, "unknown": EXIT_UNKNOWN}.get(result.outcome, 1))

    @cli.command(epilog=EXIT_HELP)
    @click.argument("message_id")
    @click.argument("text", required=False)
    @click.option("--decline", is_flag=True, help="Decline it; TEXT is the reason.")
    @click.option("--done", is_flag=True, help="Mark it done; TEXT is an optional note.")
    @with_from
    @json_opt
    @click.pass_context
    def reply(ctx: click.Context, message_id: str, text: str | None, decline: bool, done: bool, from_address: str | None,
              as_json: bool, **named: Any) -> None:
        """Answer MESSAGE_ID, a message addressed to the current session; the answer goes back
        to its sender."""
        if decline and done:
            raise click.UsageError("choose one of --decline and --done")
        kind = "decline" if decline else ("done" if done else None)
        app = get_app(ctx)
        me = who_am_i(app, from_address, named)
        data = run_async(app.reply(caller=me, message_id=message_id, resolution=kind or "reply", message=text))
        emit(data, as_json, lambda d: click.echo(f"{d['resolution']['kind']}: {message_id} ({d['status']}); reply {d['messageId'] or 'none'} {d['delivery']}"))

    @cli.command(epilog=EXIT_HELP)
    @click.argument("message_id")
    @with_from
    @json_opt
    @click.pass_context
    def status(ctx: click.Context, message_id: str, from_address: str | None, as_json: bool, **named: Any) -> None:
        """Show delivery, status and reminders of a message you sent or received."""
        app = get_app(ctx)
        me = who_am_i(app, from_address, named)
        try:
            data = app.status(me, message_id)
            if data["delivery"] == "accepted" and run_async(app.refresh_delivery(data["messageId"])):
                data = app.status(me, message_id)
        except AgentLinkError as exc:
            fail(exc)
        emit(data, as_json, lambda d: click.echo(
            f"{message_id}: {d.get('deliveryNote') or d['delivery']}, status {d['status'] or 'none (fyi)'}, from {d['from']} to {d['to']}"))

    @cli.command(epilog=EXIT_HELP)
    @click.argument("message_id")
    @click.option("--timeout-ms", type=click.IntRange(0, 600000), default=60000, show_default=True)
    @with_from
    @json_opt
    @click.pass_context
    def wait(ctx: click.Context, message_id: str, timeout_ms: int, from_address: str | None, as_json: bool,
             **named: Any) -> None:
        """Wait for the resolution of MESSAGE_ID (exit 0 also on timeout: check the outcome)."""
        app = get_app(ctx)
        me = who_am_i(app, from_address, named)
        data = run_async(app.wait(caller=me, agent=message_id, reply_to=message_id, timeout_ms=timeout_ms))

        def human(d: dict[str, Any]) -> None:
            click.echo(f"{d['outcome']} after {d['waitedMs']} ms")
            if d.get("reply"):
                click.echo(d["reply"]["envelope"])

        emit(data, as_json, human)

    @cli.command(epilog=EXIT_HELP)
    @json_opt
    @ndjson_opt
    @click.pass_context
    def who(ctx: click.Context, as_json: bool, ndjson: bool) -> None:
        """Live sessions merged with your contacts."""
        from agent_link_core import api

        data = run_async(api.who(get_app(ctx)))

        def human(d: dict[str, Any]) -> None:
            table(["ALIAS", "ADDRESS", "TITLE", "FOLDER"],
                  [[s.get("alias"), s["address"], (s.get("title") or "")[:60], s.get("cwd")] for s in d["sessions"]]
                  + [[c["alias"], c["address"], "(not seen now)", c.get("project")] for c in d["offlineContacts"]])

        provider_lines(data["providers"])
        emit(data, as_json, human, ndjson)

    @cli.command(epilog=EXIT_HELP)
    @click.argument("query")
    @json_opt
    @click.pass_context
    def find(ctx: click.Context, query: str, as_json: bool) -> None:
        """Find an agent by alias, project, title or id: answers none, one or many."""
        from agent_link_core import api

        data = run_async(api.find(get_app(ctx), query))

        def human(d: dict[str, Any]) -> None:
            click.echo(d["verdict"])
            for m in d["matches"]:
                click.echo(f"  {m.get('alias') or '-'}  {m['address']}  {m.get('title') or ''}".rstrip())

        emit(data, as_json, human)
        sys.exit({"one": 0, "none": EXIT_NONE}.get(data["verdict"], EXIT_MANY))

    @cli.command(epilog=EXIT_HELP)
    @click.argument("query")
    @click.option("--sent-by", help="Only messages sent by this address.")
    @click.option("--sent-to", help="Only messages addressed or handed to this address.")
    @click.option("--since", help="Only messages sent at or after this time (ISO 8601 with a zone).")
    @click.option("--until", help="Only messages sent before this time (ISO 8601 with a zone).")
    @click.option("--status", type=click.Choice(["pending", "replied", "declined", "done", "unresolved", "expired"]))
    @click.option("--limit", type=click.IntRange(1, 100), default=20, show_default=True)
    @click.option("--cursor", help="Continue after a previous page (its nextCursor).")
    @with_from
    @json_opt
    @click.pass_context
    def search(ctx: click.Context, query: str, sent_by: str | None, sent_to: str | None, since: str | None,
               until: str | None, status: str | None, limit: int, cursor: str | None, from_address: str | None,
               as_json: bool, **named: Any) -> None:
        """Search the messages you sent or received (all with AGENT_LINK_INSPECT_ALL=1).

        QUERY: words (all must match), "exact phrases", OR, NOT, parentheses, prefix*.
        """
        app = get_app(ctx)
        me = who_am_i(app, from_address, named)
        try:
            data = app.search(me, query, from_address=sent_by, to_address=sent_to, since=since, until=until,
                              status=status, limit=limit, cursor=cursor)
        except AgentLinkError as exc:
            fail(exc)

        def human(d: dict[str, Any]) -> None:
            if not d["results"]:
                click.echo("No messages match.")
                return
            table(["ID", "SENT", "FROM", "TO", "STATUS", "SNIPPET"],
                  [[r["id"], r["sentAt"], r["from"], r["to"], r["status"] or r["delivery"],
                    r["snippet"].replace("\n", " ")] for r in d["results"]])
            if d["nextCursor"]:
                click.echo(f"more: --cursor {d['nextCursor']}")

        emit(data, as_json, human)

    @cli.command(epilog=EXIT_HELP)
    @click.argument("message_id")
    @click.option("--thread", is_flag=True, help="Show the whole conversation: what it answers, replies, follow-ups.")
    @with_from
    @json_opt
    @click.pass_context
    def show(ctx: click.Context, message_id: str, thread: bool, from_address: str | None, as_json: bool,
             **named: Any) -> None:
        """Show a message you sent or received, inside its envelope (--thread: its conversation, oldest first)."""
        app = get_app(ctx)
        me = who_am_i(app, from_address, named)
        try:
            data = app.conversation(me, message_id)
        except AgentLinkError as exc:
            fail(exc)
        if not thread:
            data = {"message": next(m for m in data["messages"] if m["id"] == data["messageId"])}

        def human(d: dict[str, Any]) -> None:
            for m in d.get("messages") or [d["message"]]:
                status = m["status"] or "fyi"
                click.echo(f"# {m['id']}  {m['sentAt']}  {m['from']} -> {m['to']}  {m['delivery']}, {status}")
                click.echo(m["envelope"])
            if d.get("hiddenCount"):
                click.echo(f"({d['hiddenCount']} messages of this conversation are not yours to see)")

        emit(data, as_json, human)

    @cli.group(epilog=EXIT_HELP)
    def contacts() -> None:
        """Short aliases for sessions (trimmed, lower case, unique, one per session)."""

    @contacts.command("add")
    @click.argument("alias")
    @click.argument("target")
    @json_opt
    @click.pass_context
    def contacts_add(ctx: click.Context, alias: str, target: str, as_json: bool) -> None:
        """Bind ALIAS to TARGET (an address, or any form `send` accepts)."""
        from agent_link_core import api

        app = get_app(ctx)
        address = run_async(api.resolve_target(app, target, app.caller()))
        try:
            data = api.add_contact(app, alias, address)
        except AgentLinkError as exc:
            fail(exc)
        emit(data, as_json, lambda d: click.echo(f"{d['alias']} -> {d['address']}"))

    @contacts.command("rename")
    @click.argument("old")
    @click.argument("new")
    @json_opt
    @click.pass_context
    def contacts_rename(ctx: click.Context, old: str, new: str, as_json: bool) -> None:
        """Rename alias OLD to NEW."""
        from agent_link_core import api

        try:
            data = api.rename_contact(get_app(ctx), old, new)
        except AgentLinkError as exc:
            fail(exc)
        emit(data, as_json, lambda d: click.echo(f"{d['alias']} -> {d['address']}"))

    @contacts.command("remove")
    @click.argument("alias")
    @json_opt
    @click.pass_context
    def contacts_remove(ctx: click.Context, alias: str, as_json: bool) -> None:
        """Forget ALIAS."""
        from agent_link_core import api

        try:
            data = api.remove_contact(get_app(ctx), alias)
        except AgentLinkError as exc:
            fail(exc)
        emit(data, as_json, lambda d: click.echo(f"removed {d['alias']} ({d['address']})"))

    @contacts.command("list")
    @json_opt
    @click.pass_context
    def contacts_list(ctx: click.Context, as_json: bool) -> None:
        """List contacts."""
        from agent_link_core import api

        data = {"version": 1, "contacts": api.list_contacts(get_app(ctx))}
        emit(data, as_json, lambda d: table(["ALIAS", "ADDRESS", "PROJECT", "LAST SEEN"],
                                            [[c["alias"], c["address"], c["project"], c["lastSeen"]] for c in d["contacts"]]))

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

    from agent_link_core import config_cli

    config_cli.register(cli, fail)
    return cli


def main() -> None:
    """Entry point of the ``agent-link`` command (everything but the hook fast path)."""
    import sqlite3

    try:
        build_cli()(prog_name="agent-link")
    except sqlite3.DatabaseError as exc:
        from agent_link_core.config import load_config
        from agent_link_core.store import database_error

        try:
            path = load_config().db_path
        except AgentLinkError:
            path = "agent-link.db"
        fail(database_error(path, exc))
