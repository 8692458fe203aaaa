"""An argument whose bytes are not UTF-8 (a shell passes any bytes) is bad input on every
command that takes text: one line naming the argument and the byte, exit 2, no traceback.
A file name in bytes that are not UTF-8 is still a file name. A target as long as a file's
content is refused as message_agent refuses it, not echoed whole."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

BAD = b"a\xff"


def run(*args: bytes, address: str = "test:alice") -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable.encode(), b"-m", b"agent_link_core", *args], capture_output=True, timeout=120,
                          env={**os.environ, "AGENT_LINK_ADDRESS": address, "AGENT_LINK_LOAD_PLUGINS": "listings"},  # find, contacts
                          check=False)


@pytest.mark.parametrize("args", [
    (b"send", BAD, b"hello"),  # the target: a contact alias looked up in the database
    (b"find", BAD),
    (b"contacts", b"add", b"ok", b"test:" + BAD),
], ids=["send-target", "find-query", "contacts-add-target"])
def test_an_argument_that_is_not_utf8_is_one_line_and_exit_2(args: tuple[bytes, ...]) -> None:
    done = run(*args)
    position = args.index(next(a for a in args if b"\xff" in a)) + 1
    assert done.returncode == 2, done.stderr
    assert b"Traceback" not in done.stderr and done.stderr.count(b"\n") == 1, done.stderr
    assert f"argument {position} (".encode() in done.stderr and b"a\\xff" in done.stderr
    assert b"expected UTF-8 text" in done.stderr


def test_a_file_name_that_is_not_utf8_is_read(tmp_path: Path) -> None:
    path = os.fsencode(tmp_path) + b"/note-\xff.txt"
    with open(path, "wb") as f:
        f.write("the file's text".encode())
    done = run(b"send", b"test:bob", b"--file", path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(b"queued:"), done.stdout


@pytest.mark.parametrize("args", [(b"send", b"y" * 100_000, b"hello"), (b"contacts", b"add", b"ok", b"test:" + b"y" * 100_000)],
                         ids=["send", "contacts-add"])
def test_a_huge_target_is_refused_in_one_short_line(args: tuple[bytes, ...]) -> None:
    done = run(*args)
    assert done.returncode == 2, done.stderr[:300]
    command = b" ".join(args[:2] if args[0] == b"contacts" else args[:1])
    assert done.stderr.startswith(b"agent-link " + command + b": TARGET: expected at most 1000 characters") and len(done.stderr) < 300, done.stderr[:300]
