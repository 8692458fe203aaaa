"""Run ``agent-link`` in the test's own process: through click (``build_cli()`` and click's
``CliRunner``) as a script of the address it names, or as the console script runs it (the hot
commands' fast path first); and put a message in the mailbox.

One process per command costs a Python start and the plugins' imports (about a second on a
loaded 2-core machine); a test about what a command prints and how it exits runs it here. A
test about the process itself (its exit status as the shell sees it, signals, stdio bytes,
the console script's fast path) starts the real ``agent-link`` instead.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping

from click.testing import CliRunner, Result

from agent_link_core import cli as cli_mod
from agent_link_core.config import load_config
from agent_link_core.mailbox import Mailbox, OutgoingMessage, new_message_id
from agent_link_core.model import Caller
from agent_link_core.store import Store
from agent_link_testing.cli_identity import named_address_env


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
    argv, use_cache = sys.argv, discovery.USE_CACHE
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
