"""Ctrl-C on ``agent-link web`` is one line and exit 130, as for ``wait``, also while a page
holds its ``/events`` stream open: shutting down ends the streams at once, so uvicorn cancels
none (its traceback and "timeout graceful shutdown exceeded" were printed, and the exit was 0)."""

from __future__ import annotations

import http.client
import re
import signal
import subprocess
import sys
import time

import pytest

from agent_link_testing.web_page import START_BOUND_S


@pytest.mark.parametrize("page_open", [False, True])
def test_ctrl_c_is_one_line_and_exit_130(web_env: dict[str, str], page_open: bool) -> None:
    process = subprocess.Popen([sys.executable, "-m", "agent_link_core", "web", "--port", "0"],
                               env=web_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        match = re.search(r"http://127\.0\.0\.1:(\d+)/\?token=(\S+)", process.stdout.readline())
        assert match
        port, token = int(match.group(1)), match.group(2)
        host = {"Host": f"127.0.0.1:{port}"}
        if page_open:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=START_BOUND_S)
            conn.request("GET", f"/?token={token}", headers=host)
            opened = conn.getresponse()
            opened.read()
            cookie = opened.getheader("Set-Cookie", "").split(";")[0]
            conn.request("GET", "/events", headers={**host, "Cookie": cookie})
            events = conn.getresponse()
            assert events.status == 200 and events.readline() == b"event: hello\n"
        started = time.monotonic()
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=START_BOUND_S)
        if page_open:
            events.read()  # the stream was ended, not left hanging
        assert process.returncode == 130, err
        assert "Traceback" not in err and "CancelledError" not in err and "graceful shutdown" not in err, err
        assert err.splitlines()[-1] == "agent-link web: stopped by Ctrl-C (what it had finished stays done).", err
        assert time.monotonic() - started < 1.5  # within uvicorn's graceful budget (1 s): nothing had to be cancelled
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
