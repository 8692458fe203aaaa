"""Where the page listens (``--bind``) and which link it prints: ``::1`` is loopback (no
warning) and its link is ``http://[::1]:<port>/``; a server bound to every address
(``0.0.0.0``) answers, with the token, to the machine's IP addresses, never to a host name
(DNS rebinding), and its warning says who can reach it."""

from __future__ import annotations

import http.client
import re
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from agent_link_testing.web_page import START_BOUND_S
from agent_link_web.server import WebConfig, allowed_hosts, is_loopback, link_host


@contextmanager
def web(env: dict[str, str], bind: str) -> Iterator[tuple[str, str, int]]:
    """``agent-link web --bind <bind> --port 0``: its link, its first stderr line (the warning, if any) and port."""
    process = subprocess.Popen([sys.executable, "-m", "agent_link_core", "web", "--port", "0", "--bind", bind],
                               env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None and process.stderr is not None
        line = process.stdout.readline()
        match = re.search(r"(http://\S+:(\d+)/\?token=\S+)", line)
        assert match, line + process.stderr.read()
        yield match.group(1), process.stderr.readline(), int(match.group(2))
    finally:
        process.terminate()
        process.communicate(timeout=START_BOUND_S)


def get(host: str, port: int, path: str, host_header: str, cookie: str | None = None) -> Any:
    conn = http.client.HTTPConnection(host, port, timeout=30)
    conn.request("GET", path, headers={"Host": host_header, **({"Cookie": cookie} if cookie else {})})
    response = conn.getresponse()
    response.read()
    conn.close()
    return response


def test_ipv6_loopback_is_loopback_and_its_link_opens(web_env: dict[str, str]) -> None:
    with web(web_env, "::1") as (url, first_err, port):
        assert url.startswith(f"http://[::1]:{port}/?token="), url
        assert "WARNING" not in first_err, first_err
        token = url.split("token=", 1)[1]
        opened = get("::1", port, f"/?token={token}", f"[::1]:{port}")
        assert opened.status == 303  # the link connects, and the token is taken
        page = get("::1", port, "/", f"[::1]:{port}", f"agent_link_web_{port}={token}")
        assert page.status == 200


def test_every_address_answers_to_ip_addresses_with_the_token_only(web_env: dict[str, str]) -> None:
    with web(web_env, "0.0.0.0") as (url, first_err, port):
        assert "WARNING" in first_err and "any address of this machine" in first_err
        assert url.startswith(f"http://127.0.0.1:{port}/"), url
        token = url.split("token=", 1)[1]
        cookie = f"agent_link_web_{port}={token}"
        lan = f"192.0.2.2:{port}"  # as a browser on the LAN names the machine
        assert get("127.0.0.1", port, "/", lan, cookie).status == 200
        assert get("127.0.0.1", port, "/", f"[fd00::2]:{port}", cookie).status == 200
        assert get("127.0.0.1", port, "/", lan).status == 403  # still the token
        for name in (f"evil.example:{port}", f"192.0.2.2.nip.io:{port}", "192.0.2.2:1"):
            assert get("127.0.0.1", port, "/", name, cookie).status == 421, name


def test_which_hosts_a_bound_address_serves() -> None:
    assert is_loopback("::1") and is_loopback("127.0.0.2") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.0.2.2") and not is_loopback("::")
    assert link_host("::1") == "[::1]" and link_host("0.0.0.0") == "127.0.0.1" and link_host("::") == "[::1]"
    assert link_host("127.0.0.2") == "127.0.0.2"
    loopback = WebConfig("user:t", 80, allowed_hosts(80, "127.0.0.1"))
    assert loopback.serves("127.0.0.1:80") and loopback.serves("[::1]:80") and not loopback.serves("192.0.2.2:80")
    lan = WebConfig("user:t", 80, allowed_hosts(80, "192.0.2.2"))
    assert lan.serves("192.0.2.2:80") and not lan.serves("192.0.2.3:80")
    anywhere = WebConfig("user:t", 80, allowed_hosts(80, "0.0.0.0"), any_ip=True)
    assert anywhere.serves("192.0.2.3:80") and anywhere.serves("[fd00::2]:80") and not anywhere.serves("host.lan:80")



def test_a_bind_that_fails_says_only_why(web_env: dict[str, str]) -> None:
    """No "anyone who can reach it" warning for a server that never listened (8.8.8.8 is not this machine's)."""
    done = subprocess.run([sys.executable, "-m", "agent_link_core", "web", "--port", "0", "--bind", "192.0.2.77"],
                          env=web_env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and "cannot listen on 192.0.2.77" in done.stderr, done.stderr
    assert "WARNING" not in done.stderr and "anyone who can reach" not in done.stderr and done.stdout == ""
