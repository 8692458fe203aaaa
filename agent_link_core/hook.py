"""``agent-link hook <host> <event>``: the fast path host hooks run on every prompt (docs/plugins.md section 6).

Prints the host adapter's answer as the host's hook JSON and exits 0 whatever happens. It imports only light standard
modules and the core's modules written for this path (``tests/test_hook.py`` checks the list). The adapters are found in
a registry file per Python environment, ``<state dir>/prompt-hooks/<environment key>.json``, rebuilt when its
fingerprint (interpreter prefix, disabled plugins, each ``sys.path`` directory's modification time) differs.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
import time
import zlib

from agent_link_core.config import load_config
from agent_link_core.addresses import is_address, is_harness_name, is_module_path
from agent_link_core.json_files import dumps, ensure_private_dir, loads, mtime_ns, read_json_object, write_json_object

_EVENT_CHARS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-"
MAX_STDIN_BYTES = 4 * 1024 * 1024
#: the longest (ms) a statement of the hook waits for another process's lock (see :class:`HookContext`)
HOOK_BUSY_TIMEOUT_MS = 200
#: the longest (s) a plugin's adapter (its import and its answer) may take before the hook
#: gives up on it and prints nothing: the host waits for the hook before the prompt goes on
ADAPTER_BUDGET_S = 5.0
#: the most the hook prints for the host (characters of JSON); a larger answer prints nothing
MAX_OUTPUT_CHARS = 256 * 1024

TYPE_CHECKING = False  # keep typing out of the fast path
if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import Any

    from agent_link_core.config import Config
    from agent_link_core.mailbox import Mailbox


#: an address's undelivered open messages (the pending note) and whether it has delivered open
#: reply/action mail (reminders may be due): two index seeks, however many messages others have
MAIL_SQL = (
    "SELECT (SELECT COUNT(*) FROM messages WHERE recipient = ?1 AND open = 1 AND delivered_at IS NULL),"
    " EXISTS (SELECT 1 FROM messages WHERE recipient = ?1 AND open = 1 AND delivered_at IS NOT NULL AND anticipation != 'fyi')"
)
#: the mail the pending note names the senders of: as ``Mailbox.open_for(..., undelivered_only=True)``
SENDERS_SQL = "SELECT from_addr FROM messages WHERE recipient = ? AND open = 1 AND delivered_at IS NULL ORDER BY sent_at, id LIMIT 200"


class HookContext:
    """Mailbox access for a host adapter, loaded only as far as the answer needs: reads through :mod:`sqlite3` alone
    (:data:`MAIL_SQL`, :data:`SENDERS_SQL`), through the :class:`~agent_link_core.mailbox.Mailbox` once such a read fails;
    reminders, which write, use the mailbox. Reads wait at most :data:`HOOK_BUSY_TIMEOUT_MS`; writes never wait (skipped
    while another process writes, they are tried again at the next prompt).

    :param config: core settings (state dir, reminder limit and interval).
    """

    def __init__(self, config: Config) -> None:
        self.config = config
        self._mailbox: Mailbox | None = None
        self._opened = False
        self._wait_ms = min(HOOK_BUSY_TIMEOUT_MS, int(config.get("AGENT_LINK_BUSY_TIMEOUT_MS")))
        self._lean: Any = None  # the sqlite3 connection of the lean reads; False once one failed
        self._mail: dict[str, tuple[int, bool]] = {}
        #: reminders this hook claimed, ``(message id, n, address)``: given back when its
        #: output cannot be written (:func:`main`), so a reminder nobody saw is not counted
        self.claimed: list[tuple[str, int, str]] = []

    @property
    def mailbox(self) -> Mailbox | None:
        """The mailbox, or None when no database exists yet (then there is no mail)."""
        if not self._opened:
            self._opened = True
            from agent_link_core.store import Store  # only a hook that writes (or whose lean read failed) pays for it

            store = Store.open_existing(self.config.db_path, busy_timeout_ms=self._wait_ms)
            if store is not None:
                from agent_link_core.mailbox import Mailbox

                self._mailbox = Mailbox(store, self.config)
        return self._mailbox

    def _read(self, sql: str, params: tuple[Any, ...]) -> list[Any]:
        """The rows of one read (``[]`` without a database), as the class doc says."""
        path = os.fspath(self.config.db_path)
        if self._lean is None and not os.path.exists(path):
            return []
        # the C module the sqlite3 package wraps: the package adds datetime and its adapters
        # (a third of a prompt's imports), which these counts never use
        import _sqlite3 as sqlite3

        try:
            if self._lean is None:  # mode=rw: a file deleted meanwhile is not created empty; ? # % are the URI's own
                uri = "file:" + path.replace("%", "%25").replace("?", "%3f").replace("#", "%23") + "?mode=rw"
                self._lean = sqlite3.connect(uri, uri=True, timeout=self._wait_ms / 1000, isolation_level=None)
            if self._lean is not False:
                return self._lean.execute(sql, params).fetchall()
        except sqlite3.Error:
            self._lean = False
        box = self.mailbox
        return [] if box is None else box.store.conn.execute(sql, params).fetchall()

    def mail_of(self, address: str) -> tuple[int, bool]:
        """``(undelivered open messages, whether delivered open reply/action mail exists: reminders may be due)`` for
        ``address`` (:data:`MAIL_SQL`), read once; ``(0, False)`` for anything not an address."""
        if address not in self._mail:
            rows = self._read(MAIL_SQL, (address,)) if is_address(address) else []
            self._mail[address] = (int(rows[0][0]), bool(rows[0][1])) if rows else (0, False)
        return self._mail[address]

    def pending_note(self, address: str) -> str | None:
        """The "you have mail" note for undelivered mail of ``address`` (never a body)."""
        count = self.mail_of(address)[0]
        if count == 0:
            return None
        from agent_link_core.envelope import pending_notice

        return pending_notice(count, list(dict.fromkeys(row[0] for row in self._read(SENDERS_SQL, (address,)))))

    def due_reminder_note(self, address: str, via: str) -> str | None:
        """Claim and describe the reminders due for ``address`` (:func:`claim_reminders`, never waiting: while another process
        writes they stay due for the next prompt); None when none is due."""
        box = self.mailbox if self.mail_of(address)[1] else None
        claimed = claim_reminders(box, address, via, wait=False) if box is not None else None
        if claimed is None:
            return None
        self.claimed += [(mid, n, address) for mid, n in claimed[0]]
        return claimed[1]

    def heartbeat(self, host: str, event: str) -> None:
        """Leave a cheap trace that this hook ran: ``<state dir>/hooks/<host>-<event>.last`` holding epoch ms (host plugins' health reads it)."""
        state_dir = self.config.state_dir
        if not os.path.isdir(state_dir):
            return
        beat_dir = os.path.join(state_dir, "hooks")
        ensure_private_dir(beat_dir)
        beat = os.path.join(beat_dir, f"{host}-{event}.last")
        # written over in place, then cut to length: opening with O_TRUNC empties a file with
        # data, which ext4 (auto_da_alloc) answers by flushing it at close, milliseconds a prompt
        fd = os.open(beat, os.O_CREAT | os.O_WRONLY, 0o600)
        try:
            os.ftruncate(fd, os.write(fd, str(time.time_ns() // 1_000_000).encode()))
        finally:
            os.close(fd)


def claim_reminders(mailbox: Mailbox, address: str, via: str, *, wait: bool = True) -> tuple[list[tuple[str, int]], str] | None:
    """Claim the next reminder number of each message due now for ``address`` (``<harness>:<id>``), each number won by one
    process only (docs/behaviour.md §8), for a harness to show: ``([(message id, reminder number n ≥ 1)] won, the core's
    reminder text, never a body)``, or None when none is due or another process won them all. ``via``: how it is shown
    (``<harness>-prompt-hook`` ...), recorded with the ``reminded`` event; ``wait`` False: claiming stops while another
    process holds the write lock, and the rest stay due.

    :raises AgentLinkError: ``state_io_error`` (and ``state_busy`` with ``wait``) when a claim cannot be written.
    """
    from agent_link_core.envelope import reminder_notice
    from agent_link_core.errors import AgentLinkError

    won: list[tuple[str, int]] = []
    senders: list[str] = []
    for row, state in mailbox.due_reminders(address):
        n = state.reminder_count + 1
        try:
            if mailbox.record_reminder(row["id"], n, via, address, wait=wait):
                won.append((row["id"], n))
                senders.append(row["from_addr"])
        except AgentLinkError as exc:
            if wait or exc.code != "state_busy":
                raise
            break
    if not won:
        return None
    return won, reminder_notice(len(won), list(dict.fromkeys(senders)), max(n for _, n in won), mailbox.config.reminder_limit)


#: the prompt hooks' registry file's format version; a file of another version is rebuilt
FORMAT = 1
#: the budget (ms) of each plugin call while the hook rebuilds the registry (the host waits 5 s at most)
REBUILD_BUDGET_MS = 2000


def disabled_names() -> list[str]:
    """Plugin names in ``AGENT_LINK_DISABLE_PLUGINS``, sorted, and ``=only:<names>`` when
    ``AGENT_LINK_LOAD_PLUGINS`` names the only plugins to load."""
    names = sorted(set(os.environ.get("AGENT_LINK_DISABLE_PLUGINS", "").replace(",", " ").split()))
    only = os.environ.get("AGENT_LINK_LOAD_PLUGINS")
    return names if only is None else [*names, "=only:" + ",".join(sorted(set(only.replace(",", " ").split())))]


def registry_path(state_dir: str) -> str:
    """The registry file of this Python environment inside ``state_dir``."""
    key = f"{zlib.crc32(sys.prefix.encode('utf-8', 'surrogateescape')):08x}"
    return os.path.join(state_dir, "prompt-hooks", f"{key}.json")


def fingerprint(disabled: list[str]) -> list[Any]:
    """What decides which plugins load, as JSON-comparable lists (see the module doc); the
    current directory (``python -c`` / ``-m`` put it first on ``sys.path``) is left out."""
    entries = sys.path[1:] if sys.path and sys.path[0] in ("", os.getcwd()) else sys.path
    return [FORMAT, sys.prefix, disabled, [[entry, mtime_ns(entry)] for entry in entries]]


def adapter_module(state_dir: str, harness: str) -> str | None:
    """The module that answers the prompt hooks of ``harness`` (as on the command line), or None when no loaded plugin
    has one; the registry lives under ``state_dir``.

    :raises Exception: whatever rebuilding the registry raises (the hook fails open).
    """
    disabled = disabled_names()
    current = fingerprint(disabled)
    data = read_json_object(registry_path(state_dir))
    if data is None or data.get("fingerprint") != current:
        data = rebuild_registry(state_dir, current)
    entry = data.get("adapters", {}).get(harness)
    if not isinstance(entry, dict) or entry.get("plugin") in disabled:
        return None
    module = entry.get("module")
    return module if is_module_path(module) else None


def rebuild_registry(state_dir: str, current: list[Any]) -> dict[str, Any]:
    """:func:`refresh_registry` with only the core and the plugins that have adapters loaded,
    each plugin call within :data:`REBUILD_BUDGET_MS`; returns the registry."""
    from agent_link_core.boundary import CORE_PLUGIN, TIMEOUT_ENV, timeout_from_env
    from agent_link_core.plugins import plugins_of

    env = dict(os.environ)
    budget = timeout_from_env(env)
    env[TIMEOUT_ENV] = str(REBUILD_BUDGET_MS if budget == 0 else min(budget, REBUILD_BUDGET_MS))
    hooks = plugins_of(env)
    hooks.only({CORE_PLUGIN, *(plugin for _, plugin in hooks.prompt_hooks().values())})
    return refresh_registry(state_dir, hooks, current)


def refresh_registry(state_dir: str, hooks: Any, current: list[Any] | None = None) -> dict[str, Any]:
    """Rewrite the registry from ``hooks`` (a :class:`~agent_link_core.plugins.Hooks`) when it differs, and return it (also
    when the file could not be written: rebuilt next time). The MCP server does it at start, so the first prompt pays no
    rebuild and a plugin that only overran the hook's budget comes back. Adapters count whose plugins pass every start-up
    registration (run first, or read when this process ran them). ``current``: the fingerprint, when the caller has it."""
    hooks.harnesses(), hooks.settings(), hooks.migrations(), hooks.tools()
    adapters = {hook.harness: {"module": hook.module, "plugin": plugin} for hook, plugin in hooks.prompt_hooks().values()}
    data = {"fingerprint": fingerprint(disabled_names()) if current is None else current, "adapters": adapters}
    path = registry_path(state_dir)
    if read_json_object(path) != data:
        with contextlib.suppress(Exception):  # one that cannot be written is rebuilt next time
            write_json_object(path, data)
    return data


def run(host: str, event: str, raw: str) -> tuple[str, HookContext | None]:
    """The hook's stdout for ``raw`` stdin (the host's hook JSON; anything but an object prints nothing) with the
    :class:`HookContext` of the adapter of harness ``host`` (``[a-z][a-z0-9-]{0,31}``) for ``event`` (what it claimed;
    None when no adapter ran). Raises on any failure (``main`` hides it)."""
    if not is_harness_name(host) or not is_event_name(event):
        return "", None
    payload = loads(raw) if raw.strip() else {}
    if not isinstance(payload, dict):
        return "", None
    config = load_config()
    if not os.path.isdir(config.state_dir):  # no state yet: no mail to note, nothing to write
        return "", None
    module = adapter_module(os.fspath(config.state_dir), host)
    if module is None:
        return "", None
    ctx = HookContext(config)
    stdout, sys.stdout = sys.stdout, sys.stderr  # what the adapter prints is no answer (the host reads stdout); a raise ends the hook
    with _bounded(ADAPTER_BUDGET_S):  # the plugin's adapter: a hanging one never holds the host's prompt
        result = importlib.import_module(module).handle(event, payload, ctx)
    sys.stdout = stdout
    ctx.heartbeat(host, event)
    out = dumps(result) + "\n" if result is not None else ""
    if len(out) > MAX_OUTPUT_CHARS:
        raise ValueError(f"the adapter answered {len(out)} characters; at most {MAX_OUTPUT_CHARS} are printed")
    return out, ctx


def is_event_name(value: str) -> bool:
    """True for a host's hook event name: ``[A-Za-z][A-Za-z0-9_-]{0,63}``."""
    return 0 < len(value) <= 64 and value[0].isascii() and value[0].isalpha() and not value.strip(_EVENT_CHARS)


class AdapterOverran(BaseException):
    """The adapter did not answer within :data:`ADAPTER_BUDGET_S`."""


def _overran(signum: int, frame: Any) -> None:
    raise AdapterOverran(f"the adapter did not answer within {ADAPTER_BUDGET_S:g} s")


@contextlib.contextmanager
def _bounded(seconds: float) -> Iterator[None]:
    """Raise :class:`AdapterOverran` in this (main) thread after ``seconds`` inside the block (unbounded without SIGALRM)."""
    import _signal as signal  # the C module: the signal package imports enum, a tenth of a prompt hook

    if not hasattr(signal, "setitimer"):
        yield
        return
    previous = signal.signal(signal.SIGALRM, _overran)
    signal.setitimer(signal.ITIMER_REAL, seconds, 1.0)  # again each second if it is swallowed
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def main(argv: list[str]) -> int:
    """``agent-link hook <host> <event>``; always returns 0 (fail-open)."""
    if len(argv) != 2:
        sys.stderr.write("usage: agent-link hook <host> <event>  (reads the host's hook JSON on stdin)\n")
        return 0
    try:
        out, ctx = run(argv[0], argv[1], sys.stdin.read(MAX_STDIN_BYTES))
    except BaseException as exc:  # fail open (a plugin's SystemExit too): the prompt goes on without our note
        sys.stderr.write(f"agent-link hook: {_said(exc)}; nothing was done, the host goes on without agent-link's note\n")
        return 0
    if out and ctx is not None:
        try:
            sys.stdout.write(out)
            sys.stdout.flush()
        except BaseException as exc:  # the host never got the note (a closed pipe, a Ctrl-C): what it claimed is due again
            from agent_link_core.cli_run import drop_stdout

            box = ctx.mailbox if ctx.claimed else None
            for message_id, n, address in ctx.claimed if box is not None else ():
                with contextlib.suppress(Exception):  # fail open: at worst the reminder counts as shown, as before
                    box.release_reminder(message_id, n, address)
            drop_stdout()
            sys.stderr.write(f"agent-link hook: could not write the output ({getattr(exc, 'strerror', None) or type(exc).__name__})\n")
    return 0


def _said(exc: BaseException) -> str:
    """What went wrong, for the host's hook log: a bad stdin or agent-link's own refusal as such, else a fault with its exception."""
    from json import JSONDecodeError

    from agent_link_core.errors import AgentLinkError

    if isinstance(exc, JSONDecodeError):
        return f"stdin is not the host's hook JSON (not valid JSON: {exc.msg.lower()} at line {exc.lineno} column {exc.colno})"
    if isinstance(exc, UnicodeDecodeError):
        return "stdin is not the host's hook JSON (not UTF-8 text)"
    if isinstance(exc, AgentLinkError):
        return f"{exc.message.rstrip('.')} ({exc.hint.rstrip('.')})" if exc.hint else exc.message.rstrip(".")
    if isinstance(exc, KeyboardInterrupt):  # worded as entry.main words one that came before the hook ran
        return "stopped by Ctrl-C"
    return f"an unexpected fault ({type(exc).__name__}: {exc})"
