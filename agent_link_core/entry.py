"""The ``agent-link`` console script. ``agent-link hook`` (run on every prompt) is dispatched before click, pluggy, mcp or
pydantic load; ``agent-link mcp`` starts a distribution's start-up front (:func:`agent_link_core.discovery.mcp_front`) first;
the hot commands run without click (:func:`agent_link_core.cli_run.run_fast`). Plugins come from the entry-point cache."""

import os
import sys

#: the process that started this one, read first thing: ``agent-link mcp`` exits when it is gone, also when it died while
#: the server started (:func:`agent_link_core.server.serve`)
PARENT_PID = os.getppid()


def main() -> None:
    """Run ``agent-link``; exits with the command's status. A Ctrl-C that no command caught (it came while starting up)
    ends it with one stderr line and exit 130 (the prompt hook's: exit 0, it fails open), never a traceback. A Ctrl-C
    once the command has finished is ignored: it exits with the command's status (Python's shutdown would give SIGINT its
    default action back, and the process would die by the signal)."""
    import _signal  # built in: loaded at start-up

    try:
        try:
            if None in (sys.stdin, sys.stdout, sys.stderr):
                _closed_streams(sys.argv[1:])
            _run(sys.argv[1:])
        finally:
            # cli_run.ignore_ctrl_c, without importing it; a second Ctrl-C does not interrupt the goodbye either
            _signal.signal(_signal.SIGINT, _signal.SIG_IGN)
    except KeyboardInterrupt:
        if sys.argv[1:2] == ["hook"]:
            sys.stderr.write("agent-link hook: stopped by Ctrl-C; nothing was done, the host goes on without agent-link's note\n")
            sys.exit(0)
        from agent_link_core.cli_run import interrupted

        interrupted()


class _Closed:
    """A stream the process started without (``>&-``: Python makes it None): any use fails as a closed descriptor does."""
    flush = staticmethod(lambda: None)  # Python's own flush at exit: nothing is buffered

    def __getattr__(self, name: str) -> None:
        raise OSError(9, "the stream is closed")  # EBADF


def _closed_streams(argv: list[str]) -> None:
    """Closed stdio: stderr the null device, stdin :class:`_Closed` (the hook's: the null device); a closed stdout ends
    any command but the hook (fail-open), a closed stdin ``mcp``, before it does anything: one line, exit 1."""
    hook = argv[:1] == ["hook"]
    for stream in (sys.stdin, sys.stdout, sys.stderr):  # the null device in each closed slot, lowest first: no file
        if stream is None:  # opened later (a log) lands on one, nor a child's output that inherits it
            os.open(os.devnull, os.O_RDWR)
    sys.stderr = sys.stderr or open(2, "w", closefd=False)  # noqa: SIM115 - no one to tell
    if (sys.stdout is None and not hook) or (sys.stdin is None and argv[:1] == ["mcp"]):
        what = "write the output (stdout" if sys.stdout is None else "read the input (stdin"
        sys.stderr.write(f"agent-link: could not {what} is closed); nothing was done.\n")
        sys.exit(1)
    sys.stdin = sys.stdin or (open(os.devnull) if hook else _Closed())  # type: ignore[assignment]  # noqa: SIM115
    sys.stdout = sys.stdout or _Closed()  # type: ignore[assignment]


def _run(argv: list[str]) -> None:
    if argv[:1] == ["hook"]:
        from agent_link_core.hook import main as hook_main

        sys.exit(hook_main(argv[1:]))
    from agent_link_core import discovery

    discovery.USE_CACHE = True  # a whole process of its own: entry points come from the checked cache
    if argv == ["mcp"]:  # not with options (--help prints and exits without serving)
        # answer the connection's opening before click, the MCP SDK and the plugins load; what distributions do
        # first (the presence plugin: the configured address counts as served before that answer) runs before it
        discovery.mcp_start()
        discovery.mcp_front(start=True)  # none: the full server answers the opening once loaded
    from agent_link_core import cli_run

    if cli_run.guarded(lambda: cli_run.run_fast(argv)):  # the hot commands, without click
        return
    from agent_link_core.cli import main as cli_main

    cli_main()

