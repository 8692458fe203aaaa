"""Run ``agent-link`` in the test's own process: through click (``build_cli()`` and click's
``CliRunner``) as a script of the address it names, or as the console script runs it (the hot
commands' fast path first); the same as a real ``agent-link`` process; and put a message in
the mailbox.

One process per command costs a Python start and the plugins' imports (about a second on a
loaded 2-core machine); a test about what a command prints and how it exits runs it here. A
test about the process itself (its exit status as the shell sees it, signals, stdio bytes,
the console script's fast path) starts the real ``agent-link`` instead.
"""

from __future__ import annotations

import functools
import importlib.metadata
import json
import os
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from click.testing import CliRunner, Result

from agent_link_core import cli as cli_mod
from agent_link_core.config import load_config
from agent_link_core.mailbox import Mailbox, new_message_id
from agent_link_core.records import OutgoingMessage
from agent_link_core.model import Caller
from agent_link_core.store import Store
from agent_link_testing.cli_identity import named_address_env

#: the console script of the interpreter running the tests
AGENT_LINK = str(Path(sys.executable).with_name("agent-link"))
#: a bound for a hung command (s), never a speed expectation
RUN_BOUND_S = 120


def invoke(*args: str, env: Mapping[str, str | None] | None = None, stdin: str | bytes | None = None,
           catch_exceptions: bool = False) -> Result:
    """``agent-link ARGS`` through click in this process, as the address ``--as``/``--from``
    names (:func:`~agent_link_testing.cli_identity.named_address_env`) with ``env`` on top.

    :param args: the command line after ``agent-link``.
    :param env: variables set (a value ``None`` unsets) for this run only.
    :param stdin: what the command reads on stdin.
    :param catch_exceptions: False (the default) lets an exception the CLI did not turn into a
        one-line error fail the test with its traceback; ``SystemExit`` is always the exit code.
    :returns: click's :class:`~click.testing.Result` (``exit_code``, ``stdout``, ``stderr``,
        ``output``: both, as a terminal shows them).
    """
    build_cli = cli_mod.build_cli  # looked up per call: tests may replace it
    return CliRunner().invoke(build_cli(), list(args), input=stdin, env={**named_address_env(args), **(env or {})},
                              catch_exceptions=catch_exceptions, prog_name="agent-link")


def run_click(*args: str, env: Mapping[str, str | None] | None = None) -> tuple[int, str, str]:
    """``agent-link ARGS`` through click alone, as the console script runs it when the fast path
    declines (:func:`agent_link_core.cli.run_click` under :func:`agent_link_core.cli_run.guarded`),
    in this process with ``env`` set: ``(exit code, stdout, stderr)``, to compare with the fast path."""
    from agent_link_core import cli_run

    code, saved = 0, sys.argv
    with CliRunner().isolation(env=env) as (out, err, _):
        sys.argv = ["agent-link", *args]
        try:
            cli_run.guarded(lambda: cli_mod.run_click(cli_mod.build_cli()))
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        finally:
            sys.argv = saved
        return code, out.getvalue().decode(), err.getvalue().decode()


def run_main(*args: str, env: Mapping[str, str | None] | None = None,
             stdin: str | bytes = "") -> subprocess.CompletedProcess[str]:
    """``agent-link ARGS`` as the console script runs it (:func:`agent_link_core.entry.main`:
    the hot commands' fast path, else click; entry points from the cache), in this process,
    with ``env`` set (a value ``None`` unsets) and ``stdin`` to read; not for ``mcp`` or ``hook``.

    An exception the command does not turn into its one-line error and exit code propagates
    (the traceback a real process would print).

    :returns: what :func:`subprocess.run` gives for the real process: ``returncode`` (the exit
        status), ``stdout`` and ``stderr`` (text, undecodable bytes as backslash escapes).
    """
    from agent_link_core import discovery, entry

    assert args[:1] not in (("mcp",), ("hook",)), "start a real process for the server and the prompt hook"
    argv, use_cache, on_sigint = sys.argv, discovery.USE_CACHE, signal.getsignal(signal.SIGINT)
    with CliRunner().isolation(input=stdin, env=env) as (out, err, _):
        sys.argv = ["agent-link", *args]
        try:
            entry.main()
            code = 0
        except SystemExit as exc:  # as the interpreter ends a process: a message is printed, status 1
            code = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1
            if not isinstance(exc.code, int | None):
                print(exc.code, file=sys.stderr)
        finally:
            sys.argv, discovery.USE_CACHE = argv, use_cache
            signal.signal(signal.SIGINT, on_sigint)  # a process's end ignores Ctrl-C (entry.main): this one goes on
            sys.stdout.flush()
            sys.stderr.flush()
        return subprocess.CompletedProcess(["agent-link", *args], code, out.getvalue().decode("utf-8", "backslashreplace"),
                                           err.getvalue().decode("utf-8", "backslashreplace"))


def seed(to: str = "test:bob", body: str = "hello <bob>", sender: str = "test:alice") -> str:
    """Store one message from ``sender`` to ``to`` expecting a reply, straight in the mailbox
    of the current environment's state dir (no send path, no plugins); returns its id."""
    config = load_config()
    store = Store(config.db_path)
    try:
        mid = new_message_id()
        Mailbox(store, config).store_message(OutgoingMessage(mid, Caller(sender, "config", sender.split(":")[0]), to, to,
                                                             body, "reply", None, None))
    finally:
        store.close()
    return mid


@functools.cache
def installed_plugins() -> str:
    """The names of the installed ``agent_link`` plugins, space-separated and sorted, as read
    once per test process (as a test module read them at import)."""
    return " ".join(sorted(ep.name for ep in importlib.metadata.entry_points(group="agent_link")))


def core_env(args: Sequence[str], env: Mapping[str, str] | None = None, plugins: Sequence[str] = ()) -> dict[str, str]:
    """The variables of a core-only script run of ``agent-link ARGS``: every installed plugin
    but ``plugins`` (a plugin's own tests name it) and those the test's ``installed_plugins(...)``
    marker names (``AGENT_LINK_LOAD_PLUGINS``: tests/conftest.py) disabled (``AGENT_LINK_DISABLE_PLUGINS``),
    as the address ``--as``/``--from`` names, with ``env`` on top."""
    keep = {*plugins, *os.environ.get("AGENT_LINK_LOAD_PLUGINS", "").split()}
    disabled = " ".join(name for name in installed_plugins().split() if name not in keep)
    return {"AGENT_LINK_DISABLE_PLUGINS": disabled, **named_address_env(args), **(env or {})}


def run_core(*args: str, env: Mapping[str, str] | None = None, stdin: str | bytes | None = None,
             plugins: Sequence[str] = ()) -> subprocess.CompletedProcess[str]:
    """:func:`run_main` with :func:`core_env` (``stdin`` None: nothing to read): the core
    alone (with ``plugins``, when the test loads them), in this process."""
    return run_main(*args, env=core_env(args, env, plugins), stdin=stdin or b"")


def core_process(*args: str, env: Mapping[str, str] | None = None, stdin: bytes | None = None,
                 stdout: int | IO[Any] = subprocess.PIPE, plugins: Sequence[str] = ()) -> subprocess.CompletedProcess[str]:
    """:func:`run_core` in a real ``agent-link`` process (for its exit status as the shell
    sees it, its stdio bytes, its file descriptors), bounded by :data:`RUN_BOUND_S`.

    :param stdout: where the process writes (a pipe read back by default, or an open file).
    :returns: the finished process; ``stdout`` (when piped) and ``stderr`` as text, undecodable
        bytes replaced.
    :raises subprocess.TimeoutExpired: when the command outlives :data:`RUN_BOUND_S`.
    """
    proc = subprocess.run([AGENT_LINK, *args], check=False, input=stdin, stdout=stdout, stderr=subprocess.PIPE,
                          env={**os.environ, **core_env(args, env, plugins)}, timeout=RUN_BOUND_S)
    return subprocess.CompletedProcess(proc.args, proc.returncode, (proc.stdout or b"").decode("utf-8", "replace"),
                                       proc.stderr.decode("utf-8", "replace"))


def sent_id(*args: str, env: Mapping[str, str] | None = None) -> str:
    """``agent-link send ARGS --json`` through :func:`run_core`; the new message's id.

    :raises AssertionError: when the send fails (with its stderr).
    """
    proc = run_core("send", *args, "--json", env=env)
    assert proc.returncode == 0, proc.stderr
    return str(json.loads(proc.stdout)["messageId"])


def delivery_of(message_id: str, as_address: str, env: Mapping[str, str] | None = None) -> str:
    """The ``delivery`` of ``message_id`` as ``agent-link status`` shows it to ``as_address``
    (``queued``, ``delivered``...), through :func:`run_core`.

    :raises AssertionError: when the status command fails (with its stderr).
    """
    proc = run_core("status", message_id, "--from", as_address, "--json", env=env)
    assert proc.returncode == 0, proc.stderr
    return str(json.loads(proc.stdout)["delivery"])
