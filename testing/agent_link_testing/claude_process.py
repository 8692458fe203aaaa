"""Running ``claude`` processes for tests in their own process group, so that no MCP server
or hook a claude process starts outlives a test: one-shot runs (:func:`run_group`, behind
:meth:`agent_link_testing.claude_host.ClaudeHost.run_p`) and long-running stream-json
sessions (:class:`ClaudeStream`, behind :meth:`~agent_link_testing.claude_host.ClaudeHost.start_stream`)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from typing import Any, Callable, Mapping

__all__ = ["ClaudeStream", "ClaudeTimeout", "kill_group", "run_group"]


class ClaudeTimeout(subprocess.TimeoutExpired):
    """``claude`` did not exit within the timeout; its process group was killed.

    ``output`` / ``stderr`` hold what it printed before being killed (str).
    """


class ClaudeStream:
    """A ``claude -p`` process in stream-json mode: one JSON user turn per stdin line, JSON
    events on stdout (``system`` init, ``user``, ``assistant``, ``result`` ...). It stays up
    while stdin is open (docs/hosts/claude-code.md §2), which channel notifications need (§8).

    ``events`` holds every parsed stdout line so far (thread-safe snapshot); ``stderr`` the
    text read so far. :meth:`close` ends stdin, waits up to ``timeout_s`` and then kills the
    whole process group (claude, its MCP servers and hooks).
    """

    def __init__(self, argv: list[str], *, cwd: os.PathLike[str] | str, env: Mapping[str, str]) -> None:
        self.argv = argv
        self.proc = subprocess.Popen(
            argv, cwd=os.fspath(cwd), env=dict(env), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, start_new_session=True,
        )
        self._cond = threading.Condition()
        self._events: list[dict[str, Any]] = []
        self._stderr: list[str] = []
        self._readers = [
            threading.Thread(target=self._read_stdout, daemon=True, name="claude-stream-stdout"),
            threading.Thread(target=self._read_stderr, daemon=True, name="claude-stream-stderr"),
        ]
        for reader in self._readers:
            reader.start()

    def _read_stdout(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if isinstance(event, dict):
                with self._cond:
                    self._events.append(event)
                    self._cond.notify_all()
        with self._cond:
            self._cond.notify_all()

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            with self._cond:
                self._stderr.append(line)

    @property
    def events(self) -> list[dict[str, Any]]:
        with self._cond:
            return list(self._events)

    @property
    def stderr(self) -> str:
        with self._cond:
            return "".join(self._stderr)

    def send(self, text: str) -> None:
        """Write one user turn (``{"type":"user","message":{"role":"user","content":text}}``)."""
        assert self.proc.stdin is not None
        line = json.dumps({"type": "user", "message": {"role": "user", "content": text}})
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def wait_for(self, predicate: Callable[[list[dict[str, Any]]], bool], timeout_s: float = 30.0) -> list[dict[str, Any]]:
        """Block until ``predicate(events)`` holds; returns the events.

        Raises:
            TimeoutError: not within ``timeout_s`` seconds, or the process exited first
                (the message holds the tail of stderr).
        """
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while not predicate(list(self._events)):
                remaining = deadline - time.monotonic()
                if remaining <= 0 or (self.proc.poll() is not None and not self._readers[0].is_alive()):
                    raise TimeoutError(
                        f"claude stream: condition not met in {timeout_s}s (rc={self.proc.poll()}); "
                        f"stderr tail: {''.join(self._stderr)[-1500:]}"
                    )
                self._cond.wait(min(remaining, 0.5))
            return list(self._events)

    def wait_results(self, count: int, timeout_s: float = 30.0) -> list[dict[str, Any]]:
        """Wait until ``count`` ``result`` events (finished turns) arrived; returns them."""
        events = self.wait_for(lambda evs: sum(e.get("type") == "result" for e in evs) >= count, timeout_s)
        return [e for e in events if e.get("type") == "result"]

    def close(self, timeout_s: float = 15.0) -> int | None:
        """Close stdin, wait up to ``timeout_s`` for claude to exit, then kill the process group.

        Returns claude's exit code (None if it had to be killed)."""
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            try:
                self.proc.stdin.close()
            except OSError:
                pass
        rc: int | None
        try:
            rc = self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            rc = None
        kill_group(self.proc.pid, signal.SIGKILL)
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=5)
        for reader in self._readers:
            reader.join(timeout=5)
        return rc

    def __enter__(self) -> "ClaudeStream":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def kill_group(pgid: int, sig: int) -> None:
    """Send ``sig`` to process group ``pgid``; a group already gone (or not ours) is no error."""
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def run_group(
    argv: list[str],
    *,
    cwd: os.PathLike[str] | str,
    env: Mapping[str, str],
    timeout_s: float,
    input: str | None = None,  # noqa: A002 - subprocess naming
) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` in its own process group, wait at most ``timeout_s``, then kill the group
    (see :func:`agent_link_testing.claude_host.run_claude_p` for the timeout rules)."""
    proc = subprocess.Popen(
        argv,
        cwd=os.fspath(cwd),
        env=dict(env),
        stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    pgid = proc.pid  # start_new_session: the child leads its own process group
    try:
        try:
            out, err = proc.communicate(input=input, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            if proc.poll() is None:  # claude itself is still running: a real timeout
                kill_group(pgid, signal.SIGTERM)
                try:
                    out, err = proc.communicate(timeout=3)
                except subprocess.TimeoutExpired:
                    kill_group(pgid, signal.SIGKILL)
                    out, err = proc.communicate(timeout=5)
                raise ClaudeTimeout(argv, timeout_s, output=out, stderr=err) from None
            # claude exited but a leftover group member holds our pipes open: kill the group
            kill_group(pgid, signal.SIGKILL)
            try:
                out, err = proc.communicate(timeout=5)
            except subprocess.TimeoutExpired:  # a daemonised child outside the group
                raise ClaudeTimeout(argv, timeout_s, output="", stderr="claude exited but its stdout/stderr stayed open") from None
    finally:
        kill_group(pgid, signal.SIGKILL)
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=5)
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)
