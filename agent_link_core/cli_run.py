"""What the ``agent-link`` commands share, without click: the App of an invocation, one-line errors, output, and the fast
path (:func:`run_fast`) running a core command declared as data (:func:`command`); what it does not take goes to click."""

from __future__ import annotations

import os
import sys

from agent_link_core.errors import AgentLinkError
from agent_link_core.lazy import import_target

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any, Callable, NoReturn
    from agent_link_core.app import App
    from agent_link_core.plugins import Hooks

EXIT_HELP = """\b
Exit codes:
  0  success (send: delivered, accepted or queued; find: exactly one match)
  1  agent-link refused or failed (stderr says why and what to do); send: rejected
  2  bad usage (unknown option, missing argument)
  3  send: outcome unknown (not resent; see --retry-unknown)
  4  find: no match
  5  find: several matches
  6  wait, send --wait: no answer (timed out, or the message expired or went unresolved)
  7  send --require-delivered: not delivered (accepted or queued)
  130  Ctrl-C stopped the command (wait, send --wait: stderr says how to wait again)"""
EXIT_UNKNOWN, EXIT_UNDELIVERED = 3, 7
#: the core commands :func:`run_fast` runs: name -> ``"module:attribute"`` of a :class:`Command`
FAST_COMMANDS = {name: f"agent_link_core.commands.{module}:{name}" for name, module in
                 (("inbox", "inbox"), ("send", "send"), ("reply", "message"), ("status", "message"), ("show", "message"))}
_BAD = object()  # a value the fast parser does not take: click words the refusal


class Param:
    """One option (``option("--as", "as_address", help=...)``: flags, then optionally the parameter name) or argument.

    :param kind: ``whole`` / ``finite`` (an int / a non-nan float in ``low``-``high``, None = open), ``choice``
        (``choices``), ``file`` (a path that is no directory), else text.
    """

    def __init__(self, *decls: str, argument: bool = False, flag: bool = False, kind: str | None = None,
                 low: float | None = None, high: float | None = None, choices: tuple[str, ...] = (),
                 default: Any = None, required: bool = True, help: str | None = None, show_default: bool = False) -> None:
        self.opts = tuple(d for d in decls if d.startswith("-")) if not argument else ()
        named = [d for d in decls if not d.startswith("-")]
        self.name = named[0] if named else self.opts[0].lstrip("-").replace("-", "_")
        self.argument, self.flag, self.kind, self.low, self.high, self.choices = argument, flag, kind, low, high, choices
        self.default = False if flag and default is None else default
        self.required, self.help, self.show_default = required, help, show_default

    def convert(self, text: str) -> Any:
        """``text`` as this parameter's value, or :data:`_BAD` (click then refuses it in its words)."""
        if self.kind in ("whole", "finite"):
            try:
                value: Any = int(text) if self.kind == "whole" else float(text)
            except ValueError:
                return _BAD
            inside = value == value and (self.low is None or value >= self.low) and (self.high is None or value <= self.high)
            return value if inside else _BAD
        if self.kind == "choice":
            return text if text in self.choices else _BAD
        if self.kind == "file" and os.path.exists(text) and (os.path.isdir(text) or not os.access(text, os.R_OK)):
            return _BAD
        return text


option = Param


def argument(name: str, required: bool = True) -> Param:
    """A positional argument (``required=False``: may be left out)."""
    return Param(name, argument=True, required=required)


JSON = option("--json", "as_json", flag=True, help="Print one JSON object (indented).")
NDJSON = option("--ndjson", flag=True, help="Print the same JSON object on one line.")
ENVELOPE = option("--envelope", "show_envelope", flag=True,
                  help="Print each message inside its <agent-link-message> envelope (what a model sees).")
#: ``--from``: plus the sender options the installed harnesses declare (``Command.sender``)
FROM = option("--from", "from_address", help="Act as this address (unverified).")
#: ``--from`` for a command that shows mail: the address must be proved, as for ``--as``
READER_FROM = option("--from", "from_address",
                     help="Read as this address: only inside that address's own session (its AGENT_LINK_ADDRESS), "
                          "or where the machine's user set AGENT_LINK_INSPECT_ALL=1.")


class Command:
    """A core command: its function (called with the context and every parameter by name) and :class:`Param` list;
    ``sender``: it has ``--from``, so the harnesses' sender options too (in ``**named``); ``reader``: it only reads, so in a
    state dir that cannot be written it reads what is there and says what was not recorded (``App.read_only``)."""

    def __init__(self, callback: Callable[..., Any], params: list[Param], sender: bool, reader: bool = False) -> None:
        self.callback, self.params, self.sender, self.reader = callback, params, sender, reader
        self.name = callback.__name__

    def run(self, ctx: Any, **values: Any) -> None:
        """Call the command; an AgentLinkError it raises ends it in its own words (:func:`fail`), Ctrl-C with :func:`interrupted`."""
        if values.get("as_json") and values.get("ndjson"):
            usage_error("choose one of --json and --ndjson")
        try:
            self.callback(ctx, **values)
        except AgentLinkError as exc:
            fail(exc)
        except KeyboardInterrupt:
            interrupted(self.name)
        finally:
            ignore_ctrl_c()


def command(*params: Param, reader: bool = False) -> Callable[[Callable[..., Any]], Command]:
    """Declare a core command (its function's name and docstring: its name and help; ``reader``: :attr:`Command.reader`)."""
    return lambda callback: Command(callback, list(params), any(p in (FROM, READER_FROM) for p in params), reader)


class Context:
    """The part of click's ``Context`` a command uses, for the fast path."""

    def __init__(self, info_name: str, parent: Context | None = None, command: Command | None = None) -> None:
        self.info_name, self.parent, self.command = info_name, parent, command
        self.meta: dict[str, Any] = {}
        self.command_path: str = f"{parent.command_path} {info_name}" if parent is not None else info_name
        self.closers: list[Callable[[], Any]] = []

    def find_root(self) -> Context:
        return self.parent.find_root() if self.parent else self

    def call_on_close(self, closer: Callable[[], Any]) -> None:
        self.closers.append(closer)


#: the fast path's current context (None on click's path: click's own is current there)
_current: Context | None = None


def parse(params: list[Param], args: list[str]) -> dict[str, Any] | None:
    """``{parameter name: value}`` of ``args`` as click parses them, or None for what the fast path leaves to click."""
    longs = {decl: p for p in params for decl in p.opts}
    positional = [p for p in params if p.argument]
    values = {p.name: p.default for p in params}
    given: list[str] = []
    rest = list(args)
    while rest:
        token = rest.pop(0)
        if token == "--":
            given += rest
            break
        if not token.startswith("-") or token == "-":
            given.append(token)
            continue
        flag, eq, text = token.partition("=")
        p = longs.get(flag)
        if p is None or (p.flag and eq):
            return None
        if p.flag:
            values[p.name] = True
            continue
        if not eq:
            if not rest or (rest[0].startswith("-") and rest[0] != "-"):
                return None
            text = rest.pop(0)
        value = p.convert(text)
        if value is _BAD:
            return None
        values[p.name] = value
    if len(given) > len(positional) or any(p.required for p in positional[len(given):]):
        return None
    values.update((p.name, text) for p, text in zip(positional, given))
    return values


def run_fast(argv: list[str]) -> bool:
    """Run a command of :data:`FAST_COMMANDS` without click; False (nothing done) for an ``argv`` click must run."""
    global _current
    if not argv or argv[0] not in FAST_COMMANDS or "--help" in argv:
        return False
    spec: Command = import_target(FAST_COMMANDS[argv[0]])
    root = _current = Context("agent-link")
    root.meta["read_only_ok"] = spec.reader
    try:
        params = spec.params
        try:  # the harnesses' declarations name the sender options: no database is opened for them
            hooks = plugin_hooks(root)
            if spec.sender:
                params = params + sender_params(hooks.harnesses(), {p.name for p in params})
        except AgentLinkError as exc:
            fail(exc)
        values = parse(params, argv[1:])
        if values is None:
            return False
        _current = Context(argv[0], root, Command(spec.callback, params, spec.sender))
        spec.run(_current, **values)
        return True
    finally:
        _current = None
        for closer in reversed(root.closers):
            closer()


def usage_error(message: str) -> NoReturn:
    """Refuse the command's arguments: one stderr line (:func:`usage_line`), exit 2."""
    ctx = _current
    if ctx is None or ctx.parent is None:
        import click

        raise click.UsageError(message)
    echo(usage_line(ctx.command_path, message), err=True)
    sys.exit(2)


def usage_line(command_path: str, message: str) -> str:
    """A usage error in one line: ``agent-link inbox: --offset needs --message-id (see 'agent-link inbox --help')``."""
    return f"{command_path}: {message} (see '{command_path} --help')"


def echo(message: Any = "", err: bool = False) -> None:
    """Print ``message`` and a newline on stdout (stderr with ``err``), flushed."""
    stream = sys.stderr if err else sys.stdout
    stream.write(f"{message}\n")
    stream.flush()


def fail(exc: AgentLinkError, names: dict[str, str] | None = None) -> NoReturn:
    """Print an AgentLinkError as one stderr line (:func:`~agent_link_core.cli_text.error_line`, ``names`` its) and exit:
    2 for bad arguments, 1 for everything else (a bad setting included)."""
    from agent_link_core.cli_text import error_line

    click = sys.modules.get("click")  # click's context on its path, else the fast path's
    ctx = (click.get_current_context(silent=True) if click is not None else None) or _current
    # at the root (a setting every command reads) there is no command to point at
    command = ctx.info_name if ctx is not None and ctx.parent is not None else None
    path = " ".join(ctx.command_path.split()[1:]) if command is not None and ctx is not None else None
    echo(error_line(exc, command, path or None, {**declared_names(ctx), **(names or {})}), err=True)
    paths = [e.get("path", "") for e in exc.details.get("errors", [])] if exc.code == "invalid_arguments" else []
    sys.exit(2 if paths and not any(p.startswith(("env.", "file.")) for p in paths) else 1)


def declared_names(ctx: Any) -> dict[str, str]:
    """``{tool argument: CLI name}`` of the parameters of ``ctx``'s command (click's or a fast :class:`Context`): an
    option's long flag (``timeout_ms``: ``{"timeoutMs": "--timeout-ms"}``), an argument's NAME (``{"alias": "ALIAS"}``)."""
    names = {}
    for p in getattr(getattr(ctx, "command", None), "params", ()):
        head, *rest = (p.name or "").split("_")
        flags = sorted((o for o in p.opts if o.startswith("-")), key=lambda o: not o.startswith("--"))
        names[head + "".join(word.title() for word in rest)] = flags[0] if flags else (p.name or "").upper()
    return names


def get_app(ctx: Any) -> App:
    """:func:`open_app`, one that cannot be opened ending the command (:func:`fail`)."""
    try:
        return open_app(ctx)
    except AgentLinkError as exc:
        fail(exc)


def open_app(ctx: Any) -> App:
    """The App of this invocation (``ctx``: click's or a fast :class:`Context`), made on first use with :func:`plugin_hooks`,
    closed at exit. :raises AgentLinkError: the settings file, the state dir or the database cannot be read."""
    root = ctx.find_root()
    if "app" not in root.meta:
        from agent_link_core.app import App

        root.meta["app"] = App.create(hooks=plugin_hooks(ctx), read_only_ok=bool(root.meta.get("read_only_ok")))
        root.call_on_close(root.meta["app"].close)
    return root.meta["app"]


def plugin_hooks(ctx: Any) -> Hooks:
    """The plugins of this invocation, loaded once without opening the database (the App reuses them).
    :raises AgentLinkError: the settings file cannot be read."""
    root = ctx.find_root()
    if "app" in root.meta:
        return root.meta["app"].hooks
    if "hooks" not in root.meta:
        from agent_link_core import plugins

        root.meta["hooks"] = plugins.load_plugins(declared=True)
    return root.meta["hooks"]


def emit(data: Any, as_json: bool, human: Any, ndjson: bool = False) -> None:
    """Print ``data`` as JSON (``--json`` indented, ``--ndjson`` one line; an object gets ``version`` 1 unless it has one)
    or call ``human(data)``."""
    if not (as_json or ndjson):
        human(data)
        return
    import json  # only for --json: the package imports re and enum, which people's output never needs

    if isinstance(data, dict) and "version" not in data:
        data = {"version": 1, **data}
    echo(json.dumps(data, ensure_ascii=False, **({"separators": (",", ":")} if ndjson else {"indent": 2})))


def output_lost(exc: OSError, what: str = "") -> NoReturn:
    """End a command whose stdout could not be written: one stderr line saying so and ``what`` (what stands), exit 1."""
    drop_stdout()
    echo(f"agent-link: could not write the output ({exc.strerror or type(exc).__name__}){'; ' + what if what else ''}.", err=True)
    sys.exit(1)


def drop_stdout() -> None:
    """Point stdout at the null device: the last flush adds no error (the hook uses it too: standard modules only)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # no file descriptor (a test runner's stream)
        pass


def show_then_mark(show: Any, mark: Any, what: str) -> Any:
    """Call ``show()``, flush stdout, and only then return ``mark()``: output never written marks nothing read
    (:func:`output_lost` says ``what``)."""
    try:
        show()
        sys.stdout.flush()
    except OSError as exc:
        output_lost(exc, what)
    return mark()


def print_messages(app: App, views: list[dict[str, Any]], show_envelope: bool) -> None:
    """Print messages for people (:func:`~agent_link_core.cli_text.message_lines`), or their envelopes."""
    from agent_link_core.cli_text import message_lines

    rows = {row["id"]: row for row in app.mailbox.rows([view["id"] for view in views])}  # one query, not one per message
    fresh = app.mailbox.envelopes([rows[view["id"]] for view in views if show_envelope and not view.get("envelope")])
    for view in views:
        if show_envelope:  # the one the read rendered (conversation, wait), else rendered now
            echo(view.get("envelope") or next(fresh))
        else:
            echo("\n".join(message_lines(view, rows[view["id"]]["body"])))


def not_marked(exc: AgentLinkError, undone: str) -> NoReturn:
    """End a read shown but not marked read (``undone``: what stays unread): one line, exit 1."""
    first = exc.message[:1].lower() if exc.message[1:2].islower() else exc.message[:1]  # "The" -> "the"; "SQLite" stays
    fail(AgentLinkError(exc.code, f"{undone}: {first}{exc.message[1:]}", exc.details, exc.hint))


def message_text(text: str | None, path: str | None) -> str:
    """The message text from TEXT, ``-`` (stdin) or ``--file PATH`` (at most the limit plus one byte read). A refusal ends
    the command (:func:`fail`): ``invalid_arguments`` (neither or both, unreadable, not UTF-8), ``body_too_large``."""
    import contextlib

    from agent_link_core.config import not_utf8
    from agent_link_core.envelope import MAX_BODY_BYTES
    from agent_link_core.errors import invalid_arguments

    def too_large(source: str) -> NoReturn:  # one refusal, wherever the text comes from
        fail(AgentLinkError("body_too_large", f"The message from {source} is over the limit of {MAX_BODY_BYTES} bytes (UTF-8).",
                            {"limitBytes": MAX_BODY_BYTES}, hint="Shorten it, or send the file's path instead of its content."))

    if (text is None) == (path is None):
        fail(invalid_arguments([{"path": "message", "rule": "required", "expected": "exactly one of TEXT, - (stdin) or --file PATH"}]))
    if text is not None and text != "-":
        # argv bytes that are not UTF-8 are lone surrogates (PEP 383): refused, as from a file
        bad = next((i for i, ch in enumerate(text) if not_utf8(ch)), None)
        if bad is not None:
            fail(invalid_arguments([{"path": "message", "rule": "utf8",
                                     "expected": f"UTF-8 text (TEXT has an invalid byte at character {bad})"}]))
        if len(text.encode("utf-8")) > MAX_BODY_BYTES:
            too_large("TEXT")
        return text
    source = "stdin" if path is None else path
    try:
        with open(path, "rb") if path is not None else contextlib.nullcontext(sys.stdin.buffer) as f:
            raw = f.read(MAX_BODY_BYTES + 1)
    except OSError as exc:
        fail(invalid_arguments([{"path": "file" if path else "message", "rule": "readable",
                                 "expected": f"a readable {source if path is None else 'file'} ({exc.strerror})"}]))
    if len(raw) > MAX_BODY_BYTES:  # read no further: its whole size is not known
        too_large("stdin" if path is None else "the file")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        fail(invalid_arguments([{"path": "file" if path else "message", "rule": "utf8",
                                 "expected": f"UTF-8 text ({source} has an invalid byte at offset {exc.start})"}]))


def run_async(coro: Any, inline: bool = False) -> Any:
    """Run a coroutine, an AgentLinkError ending the command (:func:`fail`); ``inline``: it awaits no I/O, so it runs
    without asyncio (:func:`agent_link_core.boundary.run_inline`)."""
    try:
        if inline:
            from agent_link_core.boundary import run_inline

            return run_inline(coro)
        import asyncio

        return asyncio.run(coro)
    except AgentLinkError as exc:
        fail(exc)


def ignore_ctrl_c() -> None:
    """Ignore Ctrl-C from here on: the command has finished (its output is out) or is saying why it stopped; a Ctrl-C now
    would only print a second line, or (once Python's shutdown gives SIGINT its default action back) kill the process by
    the signal. The main thread's to do (elsewhere nothing changes); a test that runs commands in its process restores it."""
    import _signal

    try:
        _signal.signal(_signal.SIGINT, _signal.SIG_IGN)
    except ValueError:
        pass


def interrupted(command: str | None = None) -> NoReturn:
    """End a command stopped by Ctrl-C: one stderr line naming ``command`` (its path after ``agent-link``), exit 130;
    another Ctrl-C from here on is ignored (it would print a second line)."""
    ignore_ctrl_c()
    where = f"agent-link {command}" if command else "agent-link"
    echo(f"{where}: stopped by Ctrl-C (what it had finished stays done).", err=True)
    sys.exit(130)


def sender_options(harnesses: Mapping[str, Any]) -> list[Any]:
    """The :class:`~agent_link_core.harness.SenderOption` list of ``harnesses`` (``{name: Harness or declaration}``),
    one per flag (the first by name defines it)."""
    seen: dict[str, Any] = {}
    for _, harness in sorted(harnesses.items()):  # declared: no harness is built for its flags
        for option_ in harness.sender_options:
            seen.setdefault(option_.flag, option_)
    return list(seen.values())


def sender_params(harnesses: Mapping[str, Any], present: set[str]) -> list[Param]:
    """The :func:`sender_options` as options, but for the parameter names in ``present``."""
    return [option(o.flag, o.param, help=o.help) for o in sender_options(harnesses) if o.param not in present]


def who_am_i(app: App, from_address: str | None, named: dict[str, Any], *, reading: bool = False) -> Any:
    """The caller a command acts as: ``--from`` / a harness's sender options, else the current session; with ``reading``
    (it shows mail) proved, as ``--as`` is (:func:`proved`)."""
    from agent_link_core.identity import named_sender

    if from_address is not None and not from_address.strip():
        usage_error("--from is empty: give an address such as team:alice, or leave the option out")
    given: dict[str, str] = {}
    for option_ in sender_options(app.harnesses.declared()):
        value = named.get(option_.param)
        if value is None:
            continue
        if option_.requires and named.get(option_.requires.lstrip("-").replace("-", "_")) is None:
            usage_error(f"{option_.flag} needs {option_.requires}")
        if from_address is not None:  # two senders named: neither may silently win
            usage_error(f"--from and {option_.flag} name the sender twice: give one of them")
        given[option_.key] = value
    try:
        me = named_sender(app, explicit=from_address, named=given or None)
    except AgentLinkError as exc:
        fail(exc)
    return proved(app, me) if reading else me  # named or not, a reader must be proved


def as_caller(app: App, as_address: str | None) -> Any:
    """The reader of a command that shows mail: ``--as ADDRESS`` or the current session, proved (:func:`proved`)."""
    from agent_link_core.cli_text import address_error
    from agent_link_core.model import Caller, address_scheme

    if as_address is not None and (problem := address_error(as_address, "as")):
        fail(problem)
    return proved(app, app.caller() if as_address is None else Caller(as_address, "cli", address_scheme(as_address)))


def proved(app: App, me: Any) -> Any:
    """``me`` (a Caller), ending the command (one line, exit 1) unless this process may read the mail of a known one
    (:func:`agent_link_core.identity.prove_reader`)."""
    from agent_link_core.identity import prove_reader, reader_proved_here
    from agent_link_core.model import RUNTIME_SOURCES

    if me.known and not reader_proved_here(app, me.address):
        # only a session its host names needs the host's proof (I/O); any other is refused without starting asyncio
        asks_host = (caller := app.caller()).known and caller.address == me.address and caller.source in RUNTIME_SOURCES
        run_async(prove_reader(app, me.address), inline=not asks_host)
    return me


def guarded(run: Callable[[], Any]) -> Any:
    """``run()``, what escapes it one stderr line and an exit code: Ctrl-C (130), stdout lost, an AgentLinkError, a
    database error, any other exception (a bug)."""
    import sqlite3

    try:
        return run()
    except KeyboardInterrupt:  # before or after a command ran (starting up, parsing): no traceback for it
        interrupted()
    except OSError as exc:
        import errno

        # commands report their own file errors: what reaches here with these is stdout failing (a closed pipe, a full disk or quota)
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
    except UnicodeEncodeError as exc:
        from agent_link_core.config import not_utf8  # an argument's bytes that are no UTF-8 reached the database or JSON: bad input
        bad = next((i for i, arg in enumerate(sys.argv[1:], 1) if not_utf8(arg)), None)
        if bad is None:
            raise_internal(exc)
        from agent_link_core.errors import invalid_arguments

        name = f"argument {bad} ({os.fsencode(sys.argv[bad]).decode('utf-8', 'backslashreplace')})"
        fail(invalid_arguments([{"path": name, "rule": "utf8", "expected": "UTF-8 text (it has a byte that is not UTF-8)"}]), {name: name})
    except Exception as exc:  # a bug must still read as one line, not a traceback
        raise_internal(exc)


def raise_internal(exc: BaseException) -> NoReturn:
    """Report an unexpected exception as one ``internal_error`` line (the traceback goes to the log)."""
    import logging

    logging.getLogger("agent_link_core.cli").exception("agent-link failed", exc_info=exc)
    fail(AgentLinkError("internal_error", f"agent-link failed unexpectedly ({type(exc).__name__}).", {"cause": type(exc).__name__},
                        hint="Rerun with AGENT_LINK_DEBUG=1 (the log names the cause) and report it."))
