"""The one guard every plugin call goes through: :meth:`Boundary.call` (synchronous code, inline and timed) and
:meth:`Boundary.acall` (awaitables, bounded by a deadline); what is a plugin's fault, and what a hang costs in this
process and the state dir's others: docs/plugins.md, section 3 ("Any exception is the plugin's", "A hang"). And running
async code from sync code that may itself be inside an event loop (:func:`run_inline`, :func:`run_blocking`)."""

from __future__ import annotations

# C modules behind signal, contextvars and threading: every command loads this module, so no imports
import _contextvars as contextvars
import _signal
import _thread
import math
import os
import sys
import time
import types
from collections.abc import Awaitable, Callable, Collection, Coroutine, Generator, Mapping

from agent_link_core.errors import AgentLinkError, Refused
from agent_link_core.json_files import read_json_object, write_json_object
from agent_link_core.lazy import LazyLogger, Struct

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, TypeVar

    T = TypeVar("T")

log = LazyLogger("agent_link_core.plugins")

DEFAULT_TIMEOUT_MS = 30_000
TIMEOUT_ENV = "AGENT_LINK_HOOK_TIMEOUT_MS"
CORE_PLUGIN = "agent_link_core.default_plugins"
#: a synchronous plugin call slower than this (ms) is logged (info, once per plugin and hook)
SLOW_MS = 1_000
#: the largest JSON answer (bytes, UTF-8) a hook, a harness's health or a tool may give
MAX_RESULT_BYTES = 1 << 20
#: the most characters one plugin's envelope contribution (elements and attributes) may add
MAX_CONTRIBUTION_CHARS = 4096
#: the largest health section (bytes of JSON) one plugin or harness may give
MAX_HEALTH_BYTES = 64 << 10

#: how the problem of a hook interrupted after the budget begins
HUNG = "did not return within"
#: a hook that hung is skipped by every process of the state dir for this long (s), then tried again
HUNG_SKIP_S = 600
HUNG_FIX = "A hook must return quickly; do I/O in a harness's async methods."
#: the budget of a synchronous call made under the database's write lock is this share of the busy timeout at most, so
#: a hang there is interrupted well before the other processes' writes give up waiting for the lock (``state_busy``); never
#: below 1 s, which a healthy hook's first import may take on a loaded machine
LOCKED_SHARE = 4


def disable_hint(plugin: str) -> str:
    """The one-line way out for a broken ``plugin`` (for the core's own hooks: report it)."""
    if plugin == CORE_PLUGIN:
        return "This is agent-link's own code: report it (AGENT_LINK_DEBUG=1 logs the cause)."
    return f"Fix or update the plugin, or turn it off with AGENT_LINK_DISABLE_PLUGINS={plugin}."


def slow_hint(plugin: str) -> str:
    """What to do about a slow call of ``plugin`` (the core's own cannot be turned off)."""
    if plugin == CORE_PLUGIN:
        return "agent-link's own hooks: the machine is likely busy; nothing to turn off."
    return f"If it stays slow on an idle machine, update the plugin or turn it off with AGENT_LINK_DISABLE_PLUGINS={plugin}."


class Problem(Struct):
    """One failure of one plugin, as ``agent-link plugins`` and health report it: in ``hook`` (``agent_link_*``, a harness
    method ``harness.<name>.<method>``, ``tool <name>`` or ``load``), the one-line ``error`` and its ``fix``; ``disabled``:
    the plugin was left out for the rest of the process; ``count``: how many times it happened in this process."""

    plugin: str
    hook: str
    error: str
    fix: str
    disabled: bool = False
    count: int = 1

    def to_dict(self) -> dict[str, Any]:
        """JSON form for health and ``agent-link plugins --json``."""
        return dict(zip(self._fields, self._values()))


class Overran(BaseException):
    """Raised inside a synchronous plugin call that outlived the hook budget (a BaseException so
    the plugin's own ``except Exception`` does not swallow it)."""


def describe(exc: BaseException) -> str:
    """``Type: message`` cut to 300 characters (no traceback: that goes to the log)."""
    text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return text[:300]


def oversize(value: Any, limit: int = MAX_RESULT_BYTES, text: str | None = None) -> str | None:
    """Why ``value`` cannot cross the boundary as JSON (not serialisable, or over ``limit``
    bytes of UTF-8), else None; ``text``: its ``json.dumps(value, ensure_ascii=False)`` if made."""
    if isinstance(value, (list, tuple, dict)) and len(value) > limit // 2:
        return f"returned {len(value)} items; at most {limit} bytes of JSON may cross"
    import json  # only a check of a big answer needs it: a read stays without re and enum

    try:
        size = len((json.dumps(value, ensure_ascii=False) if text is None else text).encode("utf-8"))
    except (TypeError, ValueError, RecursionError) as exc:
        return f"returned something that is not JSON ({describe(exc)})"
    return None if size <= limit else f"returned {size} bytes of JSON; at most {limit} may cross"


def load_failed(hooks: Any, target: str, hook: str, what: str, exc: BaseException) -> tuple[str, str]:
    """Report ``target``'s code that cannot be imported (``exc``) as its plugin's problem in ``hook`` (``hooks``: the
    process's :class:`~agent_link_core.plugins.Hooks`, None: not reported); ``(the plugin's name, the error)``."""
    error = f"{what}cannot load: {describe(exc)}"
    module = target.partition(":")[0]
    plugin = (hooks.plugin_of_module(module) if hooks is not None else None) or module.partition(".")[0]
    if hooks is not None:
        hooks.boundary.fault(plugin, hook, error, exc=exc if isinstance(exc, Exception) else None)
    return plugin, error


class CallState:
    """What one hook call learns from its guarded implementations (``with CallState() as call:``):
    ``faulted`` plugins, and ``answers``, ``(plugin, answer)`` of each that answered, in call order."""

    def __init__(self) -> None:
        self.faulted: set[str] = set()
        self.answers: list[tuple[str, Any]] = []

    def __enter__(self) -> CallState:
        self._token = _CALL.set(self)
        return self

    def __exit__(self, *exc_info: object) -> None:
        _CALL.reset(self._token)


_CALL: contextvars.ContextVar[CallState | None] = contextvars.ContextVar("agent_link_hook_call", default=None)
_PLUGIN: contextvars.ContextVar[str | None] = contextvars.ContextVar("agent_link_hook_plugin", default=None)


def check_migrations(result: Any, plugin: str, *, declared: bool = False) -> str | None:
    """Why ``plugin``'s ``agent_link_schema`` answer is refused, else None; ``declared``: migrations a package
    declares (:class:`~agent_link_core.plugins.DeclaredMigration`), whose SQL is read when applied."""
    from agent_link_core.store import Migration

    if not isinstance(result, (list, tuple)):
        return f"returned {type(result).__name__}; expected a list of Migration"
    for m in result:
        if not declared and not isinstance(m, Migration):
            return f"returned a {type(m).__name__} in its list; expected Migration records"
        if m.owner != plugin and plugin != CORE_PLUGIN:  # the core's modules own theirs
            return f"returned a migration owned by {m.owner!r}; a plugin's migrations must be owned by its own name {plugin!r}"
        if not isinstance(m.version, int) or isinstance(m.version, bool) or m.version < 1:
            return f"returned migration {m.owner}#{m.version!r}; versions are integers from 1"
        if not declared and (not isinstance(m.sql, str) or not m.sql.strip()):
            return f"returned migration {m.owner}#{m.version} without SQL"
    return None


def plain(value: Any, depth: int = 0) -> bool:
    """Whether ``value`` is JSON data of the built-in types themselves (no subclass, whose ``__getitem__`` or ``items``
    would run the plugin's code when the core reads the answer after the guarded call), at most 64 deep."""
    if (kind := type(value)) is dict:
        return depth < 64 and all(type(k) is str and plain(v, depth + 1) for k, v in value.items())
    return depth < 64 and all(plain(v, depth + 1) for v in value) if kind in (list, tuple) else kind in (str, int, float, bool, type(None))


def frozen(value: Any) -> Any:
    """``value`` (decoded JSON) read-only for the plugins sharing it: dicts as :class:`types.MappingProxyType`, lists as tuples."""
    if (kind := type(value)) is dict:
        value = value.copy()
        for key, item in value.items():  # a call only for the nested ones: a few microseconds a message
            if type(item) is dict or type(item) is list:
                value[key] = frozen(item)
        return types.MappingProxyType(value)
    return tuple(map(frozen, value)) if kind is list else value


def _str(value: Any) -> bool:
    return type(value) is str


def _check_resolution(result: Any, plugin: str) -> str | None:
    from agent_link_core.addresses import is_address

    if type(result) is not dict or not plain(result):
        return f"returned {type(result).__name__}; expected None or a dict (of JSON data) with 'address'"
    if not _str(result.get("address")) or not is_address(result["address"]):
        return "returned a resolution whose 'address' is not an address <harness>:<id>"
    for key, kind, what in (("via", str, "a string"), ("metadata", dict, "a dict"), ("served", bool, "a boolean")):
        if result.get(key) is not None and type(result[key]) is not kind:
            return f"returned a resolution whose {key!r} is not {what}"
    return None


def _check_contributions(result: Any, plugin: str) -> str | None:
    from agent_link_core.records import EnvelopeContribution

    if type(result) is not dict or not all(_str(k) and type(v) is EnvelopeContribution and type(v.attributes) is dict
                                           and type(v.elements) in (list, tuple) for k, v in result.items()):
        return f"returned {type(result).__name__}; expected None or {{message id: EnvelopeContribution}} (attributes a dict, elements a list)"
    for added in result.values():
        if any(key not in ("via", "procedure") or not _str(value) for key, value in added.attributes.items()) or any(
                not _str(e) or not e.startswith("<") or "agent-link-message" in e for e in added.elements):
            return "returned envelope attributes other than 'via' and 'procedure' (strings), or elements not made with envelope.render_element"
        if added.author is not None and not (_str(added.author) and 0 < len(added.author) <= 300 and added.author.isprintable()):
            return "returned an envelope author that is not a sentence of 1-300 printable characters on one line"
        if (size := sum(len(e) for e in added.elements) + sum(len(v) for v in added.attributes.values())) > MAX_CONTRIBUTION_CHARS:
            return f"returned an envelope contribution of {size} characters; at most {MAX_CONTRIBUTION_CHARS} are rendered"
    return None


def _check_health(result: Any, plugin: str) -> str | None:
    if type(result) not in (tuple, list) or len(result) != 2:
        return f"returned {type(result).__name__}; expected None or (section name, dict)"
    name, section = result
    if not _str(name) or not name or type(section) is not dict or not plain(section):
        return "returned a health section that is not (non-empty str, dict of JSON data)"
    why = oversize(section, MAX_HEALTH_BYTES)
    return f"{why} (health section)" if why else None


def expect(ok: Callable[[Any], bool], expected: str) -> Callable[[Any, str], str | None]:
    """A result check (:func:`~agent_link_core.lazy.hookspec`'s ``check``) refusing an answer ``ok`` rejects, ``expected``: what it wants."""
    return lambda result, plugin: None if ok(result) else f"returned {type(result).__name__}; {expected}"


def _each(ok: Callable[[Any], bool], kinds: tuple[type[Collection[Any]], ...] = (list, tuple)) -> Callable[[Any], bool]:
    return lambda result: type(result) in kinds and all(ok(item) for item in result)


def is_session(value: Any) -> bool:
    """A :class:`~agent_link_core.model.Session` whose fields a listing can show (their documented types)."""
    from agent_link_core.model import Session

    text, dict_, strings = (str, type(None)), (dict, type(None)), (tuple, list)
    kinds: dict[str, Any] = dict(address=(str,), harness=(str,), id=(str,), title=text, cwd=text, surface=strings, loaded=(bool, type(None)),
                                 archived=(bool,), last_activity_ms=(int, type(None)), receive=dict_, aliases=strings, extra=dict_)
    return (type(value) is Session and all(type(getattr(value, k)) in t for k, t in kinds.items()) and plain([value.receive, value.extra])
            and all(map(_str, (*value.surface, *value.aliases))) and oversize([value.receive, value.extra]) is None)


warnings_ok = _each(lambda w: type(w) is dict and _str(w.get("code")) and _str(w.get("message")) and plain(w))
_REGISTERS = expect(lambda r: False, "this hook returns nothing (call register(...) instead)")
#: how each of the core's hooks' non-None answer is checked; a hook absent here may return anything
RESULT_CHECKS: dict[str, Callable[[Any, str], str | None]] = {
    "agent_link_schema": check_migrations,
    "agent_link_resolve_address": _check_resolution,
    "agent_link_resolve_elsewhere": expect(lambda r: type(r) is dict and plain(r) and all(type(r.get(k, {})) is dict for k in ("metadata", "session")),
                                            "expected None or {'metadata': dict, 'session'?: dict}"),
    "agent_link_before_send": expect(warnings_ok, "expected None or a list of warnings {'code': str, 'message': str}"),
    "agent_link_before_store": expect(_str, "expected None or a stored message's id"),
    "agent_link_render_envelopes": _check_contributions,
    "agent_link_health": _check_health,
    **dict.fromkeys(("agent_link_on_event", "agent_link_sessions_listed", "agent_link_inbox_read", "agent_link_app_opened"),
                    expect(lambda r: False, "observers return nothing")),
    "agent_link_check_recipient": expect(lambda r: type(r) is dict and plain(r) and type(r.get("known")) is bool
                                         and warnings_ok([r["warning"]] if r.get("warning") is not None else []),
                                         "expected None or a dict with a boolean 'known' (and a 'warning' {'code': str, 'message': str})"),
    "agent_link_held_messages": expect(_each(_str, (set, frozenset, list, tuple)), "expected message ids"),
    "agent_link_present_sessions": expect(_each(is_session), "expected None or a list of Session"),
    "agent_link_suggest_addresses": expect(_each(_str), "expected None or a list of addresses"),
    "agent_link_server_tasks": expect(_each(callable), "expected None or a list of coroutine functions"),
    "agent_link_mcp_connection": expect(lambda r: all(callable(getattr(r, m, None)) for m in ("inbound", "outbound", "view")),
                                        "expected None or a peer with inbound, outbound and view"),
    "agent_link_session_roles": expect(lambda r: type(r) is dict and all(_str(k) and _each(_str, (list,))(v) for k, v in r.items()),
                                       "expected {address: [role name, ...]}"),
    "agent_link_listed_tools": expect(_each(_str), "expected None or a list of tool names"),
}


_sigints = 0  # real SIGINTs this process received, counted by _on_sigint


class _Frame:
    """A synchronous plugin call on the main thread, interrupted after ``deadline`` (by identity)."""

    __slots__ = ("started", "deadline")

    def __init__(self, started: float, deadline: float) -> None:
        self.started, self.deadline = started, deadline


_frames: list[_Frame] = []  # the main thread's running plugin calls, innermost last
_main_thread: int | None = None  # the thread that installed _on_alarm: the only one a timer may interrupt
# signal.getsignal's enum conversion costs ~10 us per call (more than the rest of a guarded
# call); the C module's answers the same object (SIG_DFL/SIG_IGN equal their ints).
_handler = _signal.getsignal
_get_ident = _thread.get_ident


def _on_sigint(signum: int, frame: Any) -> None:
    global _sigints
    _sigints += 1
    _signal.default_int_handler(signum, frame)


_TIMER = object()  # the argument of the timer's Overran: one a plugin raised itself is an ordinary fault


def _on_alarm(signum: int, frame: Any) -> None:
    now = time.monotonic()
    if _frames and now >= _frames[-1].deadline:  # only the code running now is blamed
        # not again while the last one is unwound (for 5 s more): its cleanup may run where none could propagate (a weakref callback)
        if not isinstance(sys.exc_info()[1], Overran) or now >= _frames[-1].deadline + 5:
            raise Overran(_TIMER)


def watch_interrupts() -> None:
    """Install the SIGINT handler that counts real Ctrl-Cs and the SIGALRM handler that interrupts an overrunning call.
    Main thread only; another's handler is left alone (then KeyboardInterrupt counts as real and overruns are only timed)."""
    global _main_thread
    try:  # signal.signal refuses any thread but the main one: threading stays unimported
        if _handler(_signal.SIGINT) is _signal.default_int_handler:
            _signal.signal(_signal.SIGINT, _on_sigint)
        if hasattr(_signal, "setitimer") and _handler(_signal.SIGALRM) == _signal.SIG_DFL:
            _signal.signal(_signal.SIGALRM, _on_alarm)
            _main_thread = _get_ident()
    except ValueError:
        return


#: SQLite primary result codes of the database file's state: READONLY, IOERR, CORRUPT, FULL, NOTADB
_STATE_CODES = frozenset({8, 10, 11, 13, 26})


def plugin_fault(exc: BaseException, sigints_before: int) -> bool:
    """Whether ``exc``, raised while plugin code ran, is that plugin's fault: anything but a
    real Ctrl-C since ``sigints_before`` (the count when the call began), the cancellation
    of the running task, or SQLite's word that the database file itself is unusable."""
    if isinstance(exc, KeyboardInterrupt):
        handler = _handler(_signal.SIGINT)
        if handler is _on_sigint:
            return _sigints == sigints_before
        # Python's own handler, uncounted: the safe reading is the user's Ctrl-C. Any other handler
        # (the MCP server exits on SIGINT) raises no KeyboardInterrupt: this one is code's.
        return handler is not _signal.default_int_handler
    sqlite3 = sys.modules.get("sqlite3")  # a damaged, full, read-only or unreadable database file is no plugin's doing:
    if sqlite3 is not None and isinstance(exc, sqlite3.Error) and (getattr(exc, "sqlite_errorcode", 0) & 0xFF) in _STATE_CODES:
        return False  # the core meets it too, and says so with its recovery step
    asyncio = sys.modules.get("asyncio")  # never imported: no task was cancelled
    if asyncio is not None and isinstance(exc, asyncio.CancelledError):
        try:
            task = asyncio.current_task()
        except RuntimeError:
            return True
        return task is None or not task.cancelling()
    return True


def _arm(budget_s: float) -> _Frame | None:
    """Bound the synchronous call about to run (main thread, SIGALRM ours), else None; a nested call only adds a frame."""
    if budget_s <= 0 or _get_ident() != _main_thread:
        return None
    if not _frames and _handler(_signal.SIGALRM) is not _on_alarm:
        return None
    now = time.monotonic()
    frame = _Frame(now, now + budget_s)
    # one timer serves nested calls: it fires again every second until they return; a nested one due sooner (a hook under
    # the write lock, inside a tool call's step) brings it forward
    if not _frames or frame.deadline < _frames[-1].deadline:
        _signal.setitimer(_signal.ITIMER_REAL, budget_s, 1.0)
    _frames.append(frame)
    return frame


def _disarm(frame: _Frame | None) -> float:
    """End ``frame`` (idempotent); the time it ended (``time.monotonic``)."""
    now = time.monotonic()
    if frame is None or frame not in _frames:
        return now
    _frames.remove(frame)
    if not _frames:
        _signal.setitimer(_signal.ITIMER_REAL, 0)
    for outer in _frames:  # time spent in an inner call is that call's, not its callers'
        outer.deadline += now - frame.started
    return now


class Boundary:
    """The guard every plugin implementation is called through, and its fault bookkeeping.

    :param timeout_ms: the hook budget (ms): a synchronous call is interrupted after it (main
        thread), an awaitable without its own bound is cancelled after it; 0 = unbounded.
    """

    def __init__(self, timeout_ms: int = DEFAULT_TIMEOUT_MS) -> None:
        self.timeout_ms = timeout_ms
        self.problems: dict[tuple[str, str, str], Problem] = {}
        self.disabled: dict[str, str] = {}
        #: ``(plugin, hook)`` -> until when (monotonic s) it is skipped: interrupted after the budget
        #: here, for the rest of the process (inf); hung in another process, for what is left of its time
        self.hung: dict[tuple[str, str], float] = {}
        self._unsaid: dict[tuple[str, str], str] = {}  # skips for another process's hang, reported when a call is skipped
        #: called with ``(plugin, reason)`` when a plugin must be left out
        self.on_disable: Callable[[str, str], None] | None = None
        #: told of each new problem (the App keeps them for other processes to see)
        self.sink: Callable[[dict[str, Any]], None] | None = None
        #: ``{plugin: {hook: [calls, last ms, slowest ms]}}`` of every guarded call
        self.timings: dict[str, dict[str, list[float]]] = {}
        #: the store's connection (the App sets it): while its transaction is open, a call's budget is at most :attr:`locked_ms`
        self.held: Any = None
        self.locked_ms = DEFAULT_TIMEOUT_MS
        watch_interrupts()

    def fault(self, plugin: str, hook: str, error: str, *, fix: str = "", disable: bool = False,
              exc: BaseException | None = None, logged: bool = True) -> Problem:
        """Record a failure of ``plugin`` in ``hook`` and log it (once per kind, then counted);
        ``disable`` leaves the plugin out for the rest of the process (never the core); ``logged``: told to :attr:`sink`."""
        if plugin == CORE_PLUGIN:  # the core is never left out: its failure is a bug to report
            disable = False
        call = _CALL.get()
        if call is not None:
            call.faulted.add(plugin)
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
            if self.sink is not None and logged:
                try:
                    self.sink(problem.to_dict())
                except Exception:  # a diagnostic that cannot be kept must not become a failure
                    log.debug("plugin problem not recorded", exc_info=True)
        if disable and plugin not in self.disabled:
            self.disabled[plugin] = f"{hook}: {error}"
            if self.on_disable is not None:
                self.on_disable(plugin, self.disabled[plugin])
        return problem

    def skip(self, plugin: str, hook: str, error: str, for_s: float) -> None:
        """Skip ``hook`` of ``plugin`` for ``for_s`` seconds (it hung in another process): a problem of this process once
        a call of it is skipped (a command that never calls it says nothing), not written to the problem log again."""
        self.hung[(plugin, hook)] = time.monotonic() + for_s
        self._unsaid[(plugin, hook)] = error

    def skipped(self, plugin: str, hook: str) -> bool:
        """Whether ``hook`` of ``plugin`` is skipped now (:attr:`hung`)."""
        if time.monotonic() < self.hung.get((plugin, hook), -math.inf):
            if (error := self._unsaid.pop((plugin, hook), None)) is not None:
                self.fault(plugin, hook, error, fix=HUNG_FIX, logged=False)  # the problem log has it already
            return True
        self.hung.pop((plugin, hook), None)  # the time another process's hang bought it is over: tried again
        return False

    def problem_of(self, plugin: str, hook: str) -> Problem | None:
        """The problem last recorded for ``hook`` of ``plugin`` (why a call of it gave its default), or None."""
        return next((p for (owner, called, _), p in reversed(self.problems.items()) if owner == plugin and called == hook), None)

    def report(self) -> list[dict[str, Any]]:
        """Every recorded problem, oldest first."""
        return [p.to_dict() for p in self.problems.values()]

    def timing_report(self) -> dict[str, dict[str, dict[str, Any]]]:
        """``{plugin: {hook: {calls, lastMs, maxMs}}}`` of the calls made in this process."""
        return {plugin: {hook: {"calls": int(n), "lastMs": round(last, 3), "maxMs": round(most, 3)} for hook, (n, last, most) in hooks.items()}
                for plugin, hooks in self.timings.items()}

    def _timed(self, plugin: str, hook: str, ms: float, *, blocking: bool = True) -> None:
        """Record a call of ``ms`` milliseconds; a slow ``blocking`` one is logged once."""
        timing = self.timings.setdefault(plugin, {}).setdefault(hook, [0, 0.0, 0.0])
        if blocking and ms > SLOW_MS and timing[2] <= SLOW_MS:
            # info, not a warning: a busy machine slows every hook, and stderr lines are noise for scripts
            log.info("agent-link plugin %r took %d ms in %s (slow). %s", plugin, ms, hook, slow_hint(plugin))
        timing[:] = timing[0] + 1, ms, max(timing[2], ms)

    def contain(self, exc: BaseException, plugin: str, hook: str, sigints_before: int, *,
                passing: tuple[type[BaseException], ...] = (), disable: bool = False, prefix: str = "", budget_ms: int = 0) -> bool:
        """Record ``exc`` as ``plugin``'s fault in ``hook``; False (the caller re-raises it) when it is not the
        plugin's: :func:`plugin_fault`, one of the ``passing`` types. ``budget_ms``: the call's, when not the hook budget."""
        if not plugin_fault(exc, sigints_before) or isinstance(exc, passing):
            return False
        if isinstance(exc, Refused):
            return True  # recorded by the register callback, which left the plugin out
        if isinstance(exc, Overran) and exc.args == (_TIMER,):
            self.hung[(plugin, hook)] = math.inf
            self.fault(plugin, hook, f"{HUNG} {budget_ms or self.timeout_ms} ms and was interrupted; not called again "
                       f"in this process or for {HUNG_SKIP_S // 60} min in others", fix=HUNG_FIX, disable=disable)
        else:
            self.fault(plugin, hook, prefix + describe(exc), disable=disable, exc=exc)
        return True

    def call(self, plugin: str, hook: str, fn: Callable[..., Any], *args: Any, default: Any = None,
             check: Callable[[Any, str], str | None] | None = None, passing: tuple[type[BaseException], ...] = (),
             disable: bool = False, prefix: str = "", **kwargs: Any) -> Any:
        """Call ``fn(*args, **kwargs)``, synchronous code of ``plugin``, inline and timed.

        :param hook: what is called, as problems name it (``agent_link_*``, ``harness.x.y``).
        :param default: the answer when the call faults.
        :param check: ``check(result, plugin)`` gives why a non-None answer is refused, or None.
        :param passing: exception types passed on (``(AgentLinkError,)`` for a documented refusal).
        :param disable: a fault leaves the plugin out; ``prefix`` goes before its error.
        :raises KeyboardInterrupt: a real Ctrl-C. :raises: the ``passing`` types.
        """
        if plugin in self.disabled or (self.hung and self.skipped(plugin, hook)):
            return default
        sigints = _sigints
        token = _PLUGIN.set(plugin)
        out, sys.stdout = sys.stdout, sys.stderr  # a plugin's print never reaches stdout (MCP, --json, a hook's answer)
        budget_ms = self.timeout_ms
        if budget_ms and self.held is not None and self.held.in_transaction:  # under the write lock every other writer waits
            budget_ms = min(budget_ms, self.locked_ms)
        frame = _arm(budget_ms / 1000)
        started = time.monotonic() if frame is None else frame.started
        try:
            result = fn(*args, **kwargs)
            # checking runs the answer's code (a property, an __eq__): within the call's budget and containment
            problem = check(result, plugin) if check is not None and result is not None else None
        except BaseException as exc:
            _disarm(frame)
            if not self.contain(exc, plugin, hook, sigints, passing=passing, disable=disable, prefix=prefix, budget_ms=budget_ms):
                raise
            return default
        finally:
            self._timed(plugin, hook, (_disarm(frame) - started) * 1000)
            _PLUGIN.reset(token)
            sys.stdout = out if out is not sys.stderr else sys.stdout  # one that found it diverted: left to that call
        return self._refused(plugin, hook, result, problem, default, disable)

    def _refused(self, plugin: str, hook: str, result: Any, problem: str | None, default: Any, disable: bool = False) -> Any:
        """``result``, or ``default`` (a fault) when its check found a ``problem``."""
        if problem is not None:
            self.fault(plugin, hook, problem, disable=disable)
            return default
        return result

    async def acall(self, plugin: str, hook: str, make: Callable[[], Awaitable[Any]], *, bound_s: float | None,
                    default: Any = None, check: Callable[[Any, str], str | None] | None = None,
                    passing: tuple[type[BaseException], ...] = (), on_timeout: Callable[[], Any] | None = None,
                    background: bool = False) -> Any:
        """Await ``make()``, asynchronous code of ``plugin``, within ``bound_s`` seconds (None:
        unbounded), each synchronous step bounded like :meth:`call`.

        :param on_timeout: makes the answer to a call that outlived ``bound_s`` (the caller
            reports it), instead of a fault and ``default``.
        :param background: a task run until its caller cancels it (a harness's ``serve``, a
            server task): that cancellation is no fault however late it comes.
        :raises asyncio.CancelledError: when the calling task is cancelled.
        """
        if plugin in self.disabled or (self.hung and self.skipped(plugin, hook)):
            return default
        import asyncio

        sigints = _sigints
        token = _PLUGIN.set(plugin)
        started = time.monotonic()
        try:
            async with asyncio.timeout(bound_s) as scope:
                result = await stepped(make(), self.timeout_ms / 1000)
        except BaseException as exc:
            if isinstance(exc, TimeoutError) and scope.expired():
                if on_timeout is not None:
                    return on_timeout()
                self.fault(plugin, hook, f"did not finish within {bound_s:g} s",
                           fix="Bound the plugin's own waits below that.")
                return default
            if self.contain(exc, plugin, hook, sigints, passing=passing):
                return default
            waited_ms = (time.monotonic() - started) * 1000
            if isinstance(exc, asyncio.CancelledError) and self.timeout_ms and waited_ms > self.timeout_ms and not background:
                self.fault(plugin, hook, f"was still running when its caller gave up after {waited_ms:.0f} ms")
            raise  # a real Ctrl-C, a type the caller handles, the cancellation of the calling task
        finally:
            _PLUGIN.reset(token)
            self._timed(plugin, hook, (time.monotonic() - started) * 1000, blocking=False)
        if check is None or result is None:
            return result
        frame = _arm(self.timeout_ms / 1000)  # checking runs the answer's code: bounded and contained as a step of it
        try:
            problem = check(result, plugin)
        except BaseException as exc:
            _disarm(frame)
            if not self.contain(exc, plugin, hook, sigints, passing=passing):
                raise
            return default
        finally:
            _disarm(frame)
        return self._refused(plugin, hook, result, problem, default)


_STARTED = object()  # no step taken yet


@types.coroutine
def stepped(awaitable: Awaitable[Any], budget_s: float, pending: Any = _STARTED, divert: bool = True) -> Generator[Any, Any, Any]:
    """Drive ``awaitable`` step by step on the running loop, each synchronous step bounded by ``budget_s`` (0: not
    bounded), its prints on stderr with ``divert`` (plugin code); ``pending``: what it yielded at a first step its caller took."""
    coro = awaitable.__await__()
    value: Any = None
    error: BaseException | None = None
    try:
        while True:
            if pending is not _STARTED:
                try:
                    value, error = (yield pending), None
                except BaseException as exc:  # thrown in by the event loop (a cancellation): passed on
                    value, error = None, exc
            frame = _arm(budget_s)
            out, sys.stdout = sys.stdout, sys.stderr if divert else sys.stdout
            try:
                pending = coro.send(value) if error is None else coro.throw(error)
            except StopIteration as stop:
                return stop.value
            finally:
                _disarm(frame)
                sys.stdout = out if out is not sys.stderr else sys.stdout
    except BaseException:
        # A Ctrl-C between two steps left the coroutine suspended: it cleans up now, while what it uses is open, not
        # when collected at exit. (One that ended is not closed again; a failing cleanup leaves the Ctrl-C standing.)
        frame = _arm(budget_s)
        out, sys.stdout = sys.stdout, sys.stderr if divert else sys.stdout
        try:
            getattr(coro, "close", lambda: None)()
        except Exception:
            pass
        finally:
            _disarm(frame)
            sys.stdout = out if out is not sys.stderr else sys.stdout
        raise


def run_inline(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to its end on this thread, stepped without an event loop (so a short CLI command never imports
    :mod:`asyncio`); should it suspend, the rest runs under :func:`asyncio.run`. Only for coroutines that await no I/O: a
    loop-only call (``asyncio.get_running_loop``) before the first suspension raises RuntimeError.

    :returns: what the coroutine returns; raises what it raises.
    """
    try:
        first = coro.send(None)
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]
    import asyncio

    async def rest() -> T:
        return await stepped(coro, 0, first, divert=False)  # type: ignore[no-any-return]

    return asyncio.run(rest())


def run_blocking(factory: Callable[[], Awaitable[T]]) -> T:
    """Run ``factory()`` to completion on a new event loop in a worker thread and return its result (or raise its
    exception). Usable with or without a running loop in the caller, which is blocked meanwhile: keep ``factory`` bounded."""
    import asyncio
    import threading

    box: dict[str, Any] = {}

    async def main() -> T:
        return await factory()

    def work() -> None:
        try:
            box["value"] = asyncio.run(main())
        except BaseException as exc:  # handed to the caller's thread
            box["error"] = exc

    worker = threading.Thread(target=work, name="agent-link-run-blocking", daemon=True)
    worker.start()
    worker.join()
    if "error" in box:
        raise box["error"]
    return box["value"]  # type: ignore[no-any-return]


def timeout_from_env(env: Mapping[str, str]) -> int:
    """``AGENT_LINK_HOOK_TIMEOUT_MS`` (0 = unbounded); a bad value keeps the default (one above a day too: no timer takes it)."""
    try:
        value = int(env.get(TIMEOUT_ENV) or DEFAULT_TIMEOUT_MS)
    except ValueError:
        return DEFAULT_TIMEOUT_MS
    return value if value == 0 or 100 <= value <= 86_400_000 else DEFAULT_TIMEOUT_MS


def _awaitable(value: Any) -> bool:
    """:func:`inspect.isawaitable` without importing inspect."""
    if isinstance(value, types.GeneratorType):  # a generator-based coroutine (types.coroutine)
        return bool(value.gi_code.co_flags & 0x100)  # inspect.CO_ITERABLE_COROUTINE
    return isinstance(value, Awaitable)


def _guarded(boundary: Boundary, func: Callable[..., Any], plugin: str, hook: str, guard: dict[str, Any],
             check: Callable[[Any, str], str | None] | None = None) -> Callable[..., Any]:
    # a registration hook's failure leaves the plugin out whole; ``guard``: its spec's (lazy.hookspec), the core's checks in RESULT_CHECKS
    registers = hook.startswith("agent_link_register_") or hook == "agent_link_schema"
    check = check or guard["check"] or RESULT_CHECKS.get(hook) or (_REGISTERS if registers else None)
    passing = (AgentLinkError,) if guard["refuses"] else ()
    awaitable = guard["awaitable"]

    def sync_check(result: Any, plugin: str) -> str | None:  # an awaitable answer is checked once awaited
        return None if check is None or (awaitable and _awaitable(result)) else check(result, plugin)

    def guarded(*args: Any) -> Any:
        result = answer = boundary.call(plugin, hook, func, *args, check=sync_check, passing=passing, disable=registers)
        if awaitable and _awaitable(answer):
            result = boundary.acall(plugin, hook, lambda: answer, bound_s=guard.get("bound_s") or boundary.timeout_ms / 1000 or None,
                                    check=check, passing=passing)
        call = _CALL.get()
        if call is not None and result is not None:
            call.answers.append((plugin, result))
        return result

    return guarded


# The problem log (docs/plugins.md, section 3): each process appends the first occurrence of each problem, health lists
# the last day's of other processes. Best effort: losing an entry only loses a diagnostic.

#: where each process appends the problems it saw (in the state dir), the newest :data:`KEEP_PROBLEMS` kept
PROBLEMS_FILE = "plugin-problems.json"
KEEP_PROBLEMS = 50
RECENT_S = 24 * 3600


def read_problems(state_dir: str) -> list[dict[str, Any]]:
    """Every kept entry (``{plugin, hook, error, fix, disabled, at (epoch s), pid, version?}``), one of another shape left out."""
    entries = (read_json_object(os.path.join(state_dir, PROBLEMS_FILE)) or {}).get("problems")
    return [e for e in entries if isinstance(e, dict) and isinstance(e.get("at"), int)
            and all(isinstance(e.get(k), str) for k in ("plugin", "hook", "error"))] if isinstance(entries, list) else []


def append_problem(state_dir: str, problem: dict[str, Any], version: str | None = None) -> None:
    """Add one problem, stamped with the time, this pid and ``version``; keeps the newest :data:`KEEP_PROBLEMS`."""
    if not os.path.isdir(state_dir):
        return
    entries = read_problems(state_dir)
    entries.append({**{k: problem[k] for k in ("plugin", "hook", "error", "fix", "disabled")}, "at": int(time.time()),
                    "pid": os.getpid(), **({"version": version} if version is not None else {})})
    write_json_object(os.path.join(state_dir, PROBLEMS_FILE), {"problems": entries[-KEEP_PROBLEMS:]})


def recent_elsewhere(state_dir: str, seen_here: list[dict[str, Any]],
                     installed: Mapping[str, str | None]) -> list[dict[str, Any]]:
    """Entries of the last day from other processes that this process has not seen itself, of
    plugins still installed at the version that had the problem.

    :param installed: ``{plugin name: version or None (not known)}`` of every plugin installed
        now, loaded or not; an entry or a plugin without a version matches any version.
    """
    mine = {(p["plugin"], p["hook"], p["error"]) for p in seen_here}
    cutoff = time.time() - RECENT_S
    return [e for e in read_problems(state_dir) if e["at"] >= cutoff and e.get("pid") != os.getpid()
            and (e["plugin"], e["hook"], e["error"]) not in mine and e["plugin"] in installed
            and e.get("version") in (None, installed[e["plugin"]] or e.get("version"))]  # either unknown, or equal


def hung_lately(state_dir: str) -> list[dict[str, Any]]:
    """Entries of hooks interrupted after the hook budget (:data:`HUNG`) by any process in the last :data:`HUNG_SKIP_S`."""
    cutoff = time.time() - HUNG_SKIP_S
    return [e for e in read_problems(state_dir) if e["at"] >= cutoff and e["error"].startswith(HUNG)]
