"""The start-up front of ``agent-link mcp`` (agent_link_hostkit.fastfront).

In process: a :class:`Front` between pipes standing for the wire and the server. Through a
subprocess: under every protocol revision the SDK serves, the front's cached opening answers
are the ones the full server gave (and gives again on the same connection).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp_types import PROTOCOL_VERSION_META_KEY
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS

from agent_link_testing import forked_processes
from agent_link_testing.mcp_client import exchange_lines

from agent_link_hostkit import fastfront
from agent_link_hostkit.fastfront import Front, load_answers, store_answers

BOUND_S = 120.0  # a bound on a wait, never a speed assertion
AGENT_LINK = str(Path(sys.executable).with_name("agent-link"))
CLIENT = {"name": "probe", "version": "1"}


def _line(obj: dict[str, Any]) -> bytes:
    return (json.dumps(obj) + "\n").encode()


def _initialize(request_id: Any, revision: str = "2025-06-18") -> bytes:
    return _line({"jsonrpc": "2.0", "id": request_id, "method": "initialize",
                  "params": {"protocolVersion": revision, "capabilities": {}, "clientInfo": CLIENT}})


class Rig:
    """A Front on pipes: ``client`` writes the wire's lines, ``server`` plays the server."""

    def __init__(self, cache_file: Path, answers: dict[str, Any] | None,
                 opened: list[tuple[bool, bytes]] | None = None, launcher_cache: Path | None = None) -> None:
        wire_in_r, self.client_w = os.pipe()
        self.client_r, wire_out_w = os.pipe()
        self.server_r, server_in_w = os.pipe()
        server_out_r, self.server_w = os.pipe()
        self.front = Front(os.fdopen(wire_in_r, "rb"), os.fdopen(wire_out_w, "wb"), server_in_w,
                           os.fdopen(server_out_r, "rb"), str(cache_file), answers, opened,
                           None if launcher_cache is None else str(launcher_cache))
        self.from_front = os.fdopen(self.client_r, "rb")
        self.server_reads = os.fdopen(self.server_r, "rb")
        self.threads = [threading.Thread(target=self.front.pump_in, daemon=True),
                        threading.Thread(target=self.front.pump_out, daemon=True)]
        for thread in self.threads:
            thread.start()

    def client_sends(self, data: bytes) -> None:
        os.write(self.client_w, data)

    def server_sends(self, data: bytes) -> None:
        os.write(self.server_w, data)

    def close(self) -> None:
        os.close(self.client_w)
        os.close(self.server_w)
        for thread in self.threads:
            thread.join(BOUND_S)


@contextmanager
def rig(tmp_path: Path, answers: dict[str, Any] | None, opened: list[tuple[bool, bytes]] | None = None,
        launcher_cache: Path | None = None) -> Iterator[Rig]:
    r = Rig(tmp_path / "cache.json", answers, opened, launcher_cache)
    try:
        yield r
    finally:
        r.close()


INIT_ANSWER = {"result": {"protocolVersion": "2025-06-18", "capabilities": {}, "serverInfo": {"name": "agent-link", "version": "0"}}}
LIST_ANSWER = {"result": {"tools": [{"name": "t", "inputSchema": {"type": "object"}}]}}


def test_cached_opening_is_answered_and_the_server_still_sees_it(tmp_path: Path) -> None:
    answers = {"initialize/2025-06-18": INIT_ANSWER, "tools/list/2025-06-18": LIST_ANSWER}
    store_answers(str(tmp_path / "cache.json"), answers)
    with rig(tmp_path, answers) as r:
        r.client_sends(_initialize("a"))
        assert json.loads(r.from_front.readline()) == {"jsonrpc": "2.0", "id": "a", **INIT_ANSWER}
        assert json.loads(r.server_reads.readline())["method"] == "initialize"
        r.client_sends(_line({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        r.client_sends(_line({"jsonrpc": "2.0", "id": 7, "method": "tools/list"}))
        assert json.loads(r.from_front.readline()) == {"jsonrpc": "2.0", "id": 7, **LIST_ANSWER}
        # the server's own answers (the same) are dropped; what follows passes on
        r.server_sends(_line({"jsonrpc": "2.0", "id": "a", **INIT_ANSWER}))
        r.server_sends(_line({"jsonrpc": "2.0", "id": 7, **LIST_ANSWER}))
        r.server_sends(_line({"jsonrpc": "2.0", "id": 8, "result": {}}))
        assert json.loads(r.from_front.readline()) == {"jsonrpc": "2.0", "id": 8, "result": {}}
    assert r.front.answered == 2 and r.front.mismatches == []
    assert load_answers(str(tmp_path / "cache.json")) == answers


def test_a_cache_the_server_contradicts_is_relearnt(tmp_path: Path) -> None:
    stale = {"initialize/2025-06-18": INIT_ANSWER, "tools/list/2025-06-18": {"result": {"tools": []}}}
    with rig(tmp_path, stale) as r:
        r.client_sends(_initialize(1))
        r.from_front.readline()
        r.server_sends(_line({"jsonrpc": "2.0", "id": 1, **INIT_ANSWER}))
        r.client_sends(_line({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}))
        r.from_front.readline()
        r.server_sends(_line({"jsonrpc": "2.0", "id": 2, **LIST_ANSWER}))
        r.server_sends(_line({"jsonrpc": "2.0", "id": 3, "result": {}}))
        r.from_front.readline()
    assert r.front.mismatches == ["tools/list/2025-06-18"]
    assert load_answers(str(tmp_path / "cache.json")) == {"tools/list/2025-06-18": LIST_ANSWER}


def test_without_a_cache_the_server_answers_and_is_learnt(tmp_path: Path) -> None:
    with rig(tmp_path, None) as r:
        r.client_sends(_initialize(1))
        assert json.loads(r.server_reads.readline())["id"] == 1
        r.server_sends(_line({"jsonrpc": "2.0", "id": 1, **INIT_ANSWER}))
        assert json.loads(r.from_front.readline()) == {"jsonrpc": "2.0", "id": 1, **INIT_ANSWER}
        meta = {PROTOCOL_VERSION_META_KEY: "2026-07-28"}
        r.client_sends(_line({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"_meta": meta}}))
        r.server_reads.readline()
        r.server_sends(_line({"jsonrpc": "2.0", "id": 2, **LIST_ANSWER}))
        r.from_front.readline()
    assert r.front.answered == 0
    assert load_answers(str(tmp_path / "cache.json")) == {"initialize/2025-06-18": INIT_ANSWER,
                                                         "tools/list/2026-07-28": LIST_ANSWER}


# -- the lines a launcher answered before exec'ing the server (hooks/agent-link.sh) ------------

def kept(folder: Path, name: str) -> dict[str, Any]:
    """An answer as the launcher keeps it: the ``"result":{...}`` member without braces."""
    return json.loads("{" + (folder / name).read_text() + "}")


def keep(folder: Path, name: str, answer: dict[str, Any]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(json.dumps(answer)[1:-1])


def test_handed_over_lines_reach_the_server_first_and_its_answers_to_them_are_dropped(tmp_path: Path) -> None:
    launcher = tmp_path / "launcher"
    keep(launcher, "initialize-2025-06-18", INIT_ANSWER)
    keep(launcher, "tools-list-2025-06-18", LIST_ANSWER)
    initialized = _line({"jsonrpc": "2.0", "method": "notifications/initialized"})
    listing = _line({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
    opened = [(True, _initialize(1)), (False, initialized), (True, listing)]
    with rig(tmp_path, None, opened, launcher) as r:
        assert [r.server_reads.readline() for _ in opened] == [line for _, line in opened]
        r.client_sends(_line({"jsonrpc": "2.0", "id": 3, "method": "ping"}))
        assert json.loads(r.server_reads.readline())["id"] == 3
        r.server_sends(_line({"jsonrpc": "2.0", "id": 1, **INIT_ANSWER}))
        r.server_sends(_line({"jsonrpc": "2.0", "id": 2, **LIST_ANSWER}))
        r.server_sends(_line({"jsonrpc": "2.0", "id": 3, "result": {}}))
        assert json.loads(r.from_front.readline()) == {"jsonrpc": "2.0", "id": 3, "result": {}}
    assert r.front.answered == 0 and r.front.mismatches == []
    assert kept(launcher, "tools-list-2025-06-18") == LIST_ANSWER


def test_the_server_keeps_its_opening_answers_for_the_launcher(tmp_path: Path) -> None:
    launcher = tmp_path / "cache" / "launcher" / "123-45"  # made on the first answer, private
    with rig(tmp_path, None, [], launcher) as r:
        r.client_sends(_initialize(1))
        r.server_reads.readline()
        r.server_sends(_line({"jsonrpc": "2.0", "id": 1, **INIT_ANSWER}))
        r.from_front.readline()
        r.client_sends(_line({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}))
        r.server_reads.readline()
        r.server_sends(_line({"jsonrpc": "2.0", "id": 2, **LIST_ANSWER}))
        r.from_front.readline()
    assert sorted(p.name for p in launcher.iterdir()) == ["initialize-2025-06-18", "tools-list-2025-06-18"]
    assert kept(launcher, "initialize-2025-06-18") == INIT_ANSWER and kept(launcher, "tools-list-2025-06-18") == LIST_ANSWER
    assert "\n" not in (launcher / "tools-list-2025-06-18").read_text()
    assert (launcher.stat().st_mode & 0o777) == 0o700 and ((launcher / "initialize-2025-06-18").stat().st_mode & 0o777) == 0o600


def test_what_the_launcher_answered_differently_is_replaced_for_the_next_start(tmp_path: Path) -> None:
    launcher = tmp_path / "launcher"
    keep(launcher, "initialize-2025-06-18", INIT_ANSWER)
    keep(launcher, "tools-list-2025-06-18", {"result": {"tools": []}})
    opened = [(True, _initialize(1)), (True, _line({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}))]
    with rig(tmp_path, None, opened, launcher) as r:
        # a real server answers a line only after the front passed it on (and noted it): wait for that
        deadline = time.monotonic() + 10
        while len(r.front.launcher_given) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        r.server_sends(_line({"jsonrpc": "2.0", "id": 1, **INIT_ANSWER}))
        r.server_sends(_line({"jsonrpc": "2.0", "id": 2, **LIST_ANSWER}))
        r.server_sends(_line({"jsonrpc": "2.0", "id": 3, "result": {}}))
        assert json.loads(r.from_front.readline())["id"] == 3  # the two answers were not passed on
    assert r.front.mismatches == ["tools/list/2025-06-18"]
    assert kept(launcher, "tools-list-2025-06-18") == LIST_ANSWER


def test_a_degraded_server_keeps_nothing_for_the_launcher(tmp_path: Path) -> None:
    launcher = tmp_path / "launcher"
    keep(launcher, "tools-list-2025-06-18", LIST_ANSWER)
    opened = [(True, _initialize(1)), (True, _line({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}))]
    with rig(tmp_path, None, opened, launcher) as r:
        fastfront._current = r.front
        try:
            fastfront.stop_learning()
        finally:
            fastfront._current = None
        r.server_sends(_line({"jsonrpc": "2.0", "id": 2, "result": {"tools": []}}))
        r.server_sends(_line({"jsonrpc": "2.0", "id": 3, "result": {}}))
        r.from_front.readline()
    assert kept(launcher, "tools-list-2025-06-18") == LIST_ANSWER


def test_the_log_says_what_was_kept_for_the_launcher(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The warning about answers that differ from the launcher's says "kept the server's"
    only when it was kept: a degraded server (a state dir it cannot use) keeps nothing."""
    launcher = tmp_path / "launcher"
    keep(launcher, "tools-list-2025-06-18", LIST_ANSWER)
    opened = [(True, _initialize(1)), (True, _line({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}))]
    for degraded in (True, False):
        caplog.clear()
        with caplog.at_level("WARNING", logger=fastfront.__name__), rig(tmp_path, None, opened, launcher) as r:
            r.front.learning = not degraded
            deadline = time.monotonic() + 10
            while len(r.front.launcher_given) < 2 and time.monotonic() < deadline:
                time.sleep(0.01)
            r.server_sends(_line({"jsonrpc": "2.0", "id": 2, "result": {"tools": []}}))
            r.server_sends(_line({"jsonrpc": "2.0", "id": 3, "result": {}}))
            r.from_front.readline()
        [said] = [rec.getMessage() for rec in caplog.records if "other answers than the server's" in rec.getMessage()]
        if degraded:
            assert kept(launcher, "tools-list-2025-06-18") == LIST_ANSWER
            assert "kept the server's" not in said and "not serving normally" in said, said
        else:
            assert kept(launcher, "tools-list-2025-06-18") == {"result": {"tools": []}}
            assert "kept the server's for the next start" in said, said


def test_handed_over_lines_are_read_with_their_marks() -> None:
    env = {"AGENT_LINK_MCP_OPENED": '1 {"id":1}\n0 {"method":"n"}\nx junk\n1 '}
    assert fastfront.opened_lines(env) == [(True, b'{"id":1}\n'), (False, b'{"method":"n"}\n')]
    assert fastfront.opened_lines({}) == []


def test_a_server_up_late_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    env = {"AGENT_LINK_MCP_OPENED_AT": "1000", "AGENT_LINK_MCP_LAUNCHER_CACHE": "/c/launcher/1-2"}
    answered = [(True, b"{}\n")]
    said = fastfront.say_if_late(env, answered, 1040.4)
    assert said is not None and "started 40 s after the host opened the connection" in said and "/c/launcher/1-2" in said
    assert said in capsys.readouterr().err
    assert fastfront.say_if_late(env, answered, 1001.0) is None  # on time
    assert fastfront.say_if_late(env, [(False, b"{}\n")], 1040.0) is None  # the launcher answered nothing
    assert fastfront.say_if_late({**env, "AGENT_LINK_MCP_OPENED_AT": "soon"}, answered, 1040.0) is None


def test_the_hand_over_is_not_in_the_cache_key() -> None:
    base = {"AGENT_LINK_HOST": "codex"}
    handed = {**base, **{name: "x" for name in fastfront.HANDOVER_VARIABLES}}
    assert fastfront.cache_key(base) == fastfront.cache_key(handed)


def test_a_degraded_server_teaches_nothing(tmp_path: Path) -> None:
    with rig(tmp_path, None) as r:
        r.front.learning = False
        r.client_sends(_initialize(1))
        r.server_reads.readline()
        r.server_sends(_line({"jsonrpc": "2.0", "id": 1, **INIT_ANSWER}))
        r.from_front.readline()
    assert not (tmp_path / "cache.json").exists()


@pytest.mark.parametrize("data", [
    b"not json\n",
    b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"\\ud800"}\n',
    _line({"jsonrpc": "2.0", "id": 4, "method": "tools/list", "params": {"cursor": "x"}}),
    _line({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "t"}}),
    b"x" * (fastfront.MAX_PARSE_BYTES + 10) + b"\n",
    b"\xff\xfe\n",
])
def test_other_lines_pass_through_untouched_and_unanswered(tmp_path: Path, data: bytes) -> None:
    answers = {"initialize/2025-06-18": INIT_ANSWER, "tools/list/2025-06-18": LIST_ANSWER}
    with rig(tmp_path, answers) as r:
        r.client_sends(data)
        r.client_sends(b"end\n")
        got = b""
        while not got.endswith(b"end\n"):
            got += r.server_reads.readline()
        assert got == data + b"end\n"
    assert r.front.answered == 0


def test_a_line_longer_than_a_chunk_reaches_the_server_whole(tmp_path: Path) -> None:
    data = b'{"id":1,"method":"initialize","x":"' + b"y" * (fastfront.CHUNK_BYTES * 2) + b'"}\n'
    with rig(tmp_path, {"initialize/2025-06-18": INIT_ANSWER}) as r:
        writer = threading.Thread(target=r.client_sends, args=(data,))
        writer.start()
        got = b""
        while not got.endswith(b"\n"):
            got += r.server_reads.readline()
        writer.join(BOUND_S)
    assert got == data and r.front.answered == 0


def test_cache_key_follows_settings_plugins_and_host() -> None:
    base = {"HOME": "/h", "AGENT_LINK_STATE_DIR": "/s"}
    key = fastfront.cache_key(base)
    assert fastfront.cache_key(dict(base)) == key
    assert fastfront.cache_key({**base, "AGENT_LINK_TOOLS": "messaging"}) != key
    # where the state lives counts by name only: a new state dir starts from the cache (issue 25)
    assert fastfront.cache_key({**base, "AGENT_LINK_STATE_DIR": "/t"}) == key
    assert fastfront.cache_key({**base, "AGENT_LINK_MAILBOX_PATH": "/m.db"}) != key
    assert fastfront.cache_key({**base, "AGENT_LINK_MAILBOX_PATH": "/m.db"}) == fastfront.cache_key(
        {**base, "AGENT_LINK_MAILBOX_PATH": "/n.db"})
    assert fastfront.cache_key({**base, "SOME_HOST_SESSION": "1"}) != key
    assert fastfront.cache_key({**base, "AGENT_LINK_DISABLE_PLUGINS": "roles"}) != key


def test_cache_key_follows_changed_code_of_an_editable_install_or_a_reinstall(tmp_path: Path,
                                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    source = tmp_path / "src" / "agent_link_fake"  # a source folder an editable install put on the path
    (source / "sub").mkdir(parents=True)
    (source / "__init__.py").write_text("")
    (source / "sub" / "tools.py").write_text("TOOLS = 1\n")
    other = tmp_path / "src" / "someone_elses"  # not agent-link's: never walked
    other.mkdir()
    (other / "__init__.py").write_text("")
    dist = tmp_path / "site" / "agent_link_fake-0.1.0.dist-info"
    dist.mkdir(parents=True)
    monkeypatch.setattr(sys, "path", [str(tmp_path / "src"), str(tmp_path / "site")])
    env = {"HOME": "/h"}
    key = fastfront.cache_key(env)
    os.utime(other / "__init__.py", ns=(10**18, 10**18))
    assert fastfront.cache_key(env) == key
    os.utime(source / "sub" / "tools.py", ns=(10**18, 10**18))
    edited = fastfront.cache_key(env)
    assert edited != key
    os.utime(dist, ns=(2 * 10**18, 2 * 10**18))
    assert fastfront.cache_key(env) != edited


# -- through a real process ----------------------------------------------------------------


def _open_connection(revision: str, env: dict[str, str]) -> list[dict[str, Any]]:
    """Open a connection to ``agent-link mcp`` the way a client of ``revision`` does; the two
    answers (initialize and tools/list, or tools/list alone), without ids."""
    if revision in MODERN_PROTOCOL_VERSIONS:
        meta = {PROTOCOL_VERSION_META_KEY: revision, "io.modelcontextprotocol/clientInfo": CLIENT,
                "io.modelcontextprotocol/clientCapabilities": {}}
        script = _line({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": meta}})
        wanted = 1
    else:
        script = (_initialize(1, revision) + _line({"jsonrpc": "2.0", "method": "notifications/initialized"})
                  + _line({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}))
        wanted = 2
    # forked from the test process's zygote (the same entry point as the console script; the
    # MCP SDK imported once, not per start): the front and the full server are what is compared
    answers = exchange_lines(forked_processes.shared().command(["mcp"], env), script, wanted, env=env, bound_s=BOUND_S)
    for answer in answers:
        answer.pop("id")
    return answers


@pytest.mark.parametrize("revision", [*HANDSHAKE_PROTOCOL_VERSIONS, *MODERN_PROTOCOL_VERSIONS])
def test_the_cached_opening_is_what_the_full_server_says(revision: str) -> None:
    """First start: the full server answers and the front learns. Second start: the front
    answers from the cache, the same server answers again on the same connection and the
    front compares the two; the cache file is left unchanged (a difference would rewrite
    it), and the client got the full server's answers."""
    env = dict(os.environ)
    first = _open_connection(revision, env)
    (cache_file,) = Path(fastfront.cache_dir(env)).glob("*.json")
    learnt = load_answers(str(cache_file))
    assert learnt is not None and f"tools/list/{revision}" in learnt
    assert first[-1]["result"]["tools"]
    before = cache_file.stat().st_mtime_ns, cache_file.read_bytes()
    second = _open_connection(revision, env)
    assert second == first
    assert (cache_file.stat().st_mtime_ns, cache_file.read_bytes()) == before


def test_a_fresh_state_dir_is_answered_from_the_cache_another_one_filled(tmp_path: Path) -> None:
    """The opening does not depend on the state dir: learnt in one, the cache answers a start
    in a state dir that does not exist yet, and the full server there says the same (the
    cache file is left unchanged)."""
    revision = HANDSHAKE_PROTOCOL_VERSIONS[-1]
    env = dict(os.environ, AGENT_LINK_STATE_DIR=str(tmp_path / "used"))
    first = _open_connection(revision, env)
    (cache_file,) = Path(fastfront.cache_dir(env)).glob("*.json")
    before = cache_file.stat().st_mtime_ns, cache_file.read_bytes()
    fresh = dict(env, AGENT_LINK_STATE_DIR=str(tmp_path / "fresh"))
    assert _open_connection(revision, fresh) == first
    assert list(Path(fastfront.cache_dir(env)).glob("*.json")) == [cache_file]  # no entry of its own learnt
    assert (cache_file.stat().st_mtime_ns, cache_file.read_bytes()) == before
    assert (tmp_path / "fresh" / "agent-link.db").exists()


@pytest.mark.parametrize("content", [b"[1]", b"[" * 100_000 + b"]" * 100_000, b"\xff{}", b"{}"])
def test_a_cache_file_that_is_not_ours_is_no_cache(tmp_path: Path, content: bytes) -> None:
    (tmp_path / "cache.json").write_bytes(content)
    assert load_answers(str(tmp_path / "cache.json")) is None


def test_a_revision_the_launcher_cannot_read_is_not_kept_for_it(tmp_path: Path) -> None:
    launcher = tmp_path / "launcher"
    with rig(tmp_path, None, [], launcher) as r:
        r.client_sends(_initialize(1, revision="../x\u0000"))
        r.server_reads.readline()
        r.server_sends(_line({"jsonrpc": "2.0", "id": 1, **INIT_ANSWER}))
        r.from_front.readline()
    assert not launcher.exists()


# -- handing the wire over to the server's transport ---------------------------------------


def test_after_the_opening_the_front_hands_the_wire_over(tmp_path: Path) -> None:
    """Once a first-page tools/list went by and the server's transport takes the wire, the
    reader thread stops after a whole line (the server's pipe ends; what it read after that
    line is handed over with the wire's fd); the writer thread passes on the server's lines up
    to the handover mark, drops the mark and stops, once every opening answer went through."""
    answers = {"initialize/2025-06-18": INIT_ANSWER}
    store_answers(str(tmp_path / "cache.json"), answers)
    with rig(tmp_path, answers) as r:
        r.front.taker = True
        r.client_sends(_initialize(1) + _line({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}) + b'{"jsonrpc":')
        assert json.loads(r.from_front.readline()) == {"jsonrpc": "2.0", "id": 1, **INIT_ANSWER}
        assert [json.loads(r.server_reads.readline())["id"] for _ in range(2)] == [1, 2]
        assert r.server_reads.readline() == b""  # the server's input pipe ended: handed over
        assert r.front.take_input() == (r.front.wire_in.fileno(), b'{"jsonrpc":')
        assert not r.front.output_free()  # tools/list (not in the cache) is not answered yet
        r.server_sends(_line({"jsonrpc": "2.0", "id": 1, **INIT_ANSWER}) + _line({"jsonrpc": "2.0", "id": 2, **LIST_ANSWER}))
        assert json.loads(r.from_front.readline()) == {"jsonrpc": "2.0", "id": 2, **LIST_ANSWER}
        assert r.front.output_free()
        r.server_sends(_line({"jsonrpc": "2.0", "method": "notifications/x"}) + fastfront.HANDOVER_MARK)
        assert json.loads(r.from_front.readline())["method"] == "notifications/x"
        for thread in r.threads:  # the reader may still be on its way out after the handover
            thread.join(BOUND_S)
        assert r.front.handed_out.is_set() and not r.threads[0].is_alive() and not r.threads[1].is_alive()
    assert load_answers(str(tmp_path / "cache.json")) == {**answers, "tools/list/2025-06-18": LIST_ANSWER}


def test_the_front_keeps_copying_when_nothing_takes_the_wire(tmp_path: Path) -> None:
    with rig(tmp_path, None) as r:
        r.client_sends(_line({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}) + _line({"jsonrpc": "2.0", "id": 3, "method": "x"}))
        assert [json.loads(r.server_reads.readline())["id"] for _ in range(2)] == [2, 3]
        assert r.front.take_input() is None and r.threads[0].is_alive()


def test_a_real_server_takes_the_wire_over_and_answers_as_before() -> None:
    """Through ``agent-link mcp`` with its front: after the opening, tool calls, a malformed
    line and a long call are answered as without the front, and the process ends when the
    client closes its input."""
    script = (_initialize(1) + _line({"jsonrpc": "2.0", "method": "notifications/initialized"})
              + _line({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}))
    calls = [_line({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {"name": "agent_link_health", "arguments": {}}})
             for i in range(3, 8)]
    long_call = _line({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
                       "params": {"name": "message_agent", "arguments": {"to": "team:bob", "message": "x" * 300_000}}})
    proc = subprocess.Popen([AGENT_LINK, "mcp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            env=dict(os.environ, AGENT_LINK_ADDRESS="team:alice"))
    assert proc.stdin is not None and proc.stdout is not None
    try:
        proc.stdin.write(script)
        proc.stdin.flush()
        assert [json.loads(proc.stdout.readline())["id"] for _ in range(2)] == [1, 2]
        proc.stdin.write(b"".join(calls) + b"not json\n" + long_call)
        proc.stdin.flush()
        answers = [json.loads(proc.stdout.readline()) for _ in range(len(calls) + 2)]
        proc.stdin.close()
        assert proc.wait(BOUND_S) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(BOUND_S)
    by_id = {a["id"]: a for a in answers}
    assert all(by_id[i]["result"]["structuredContent"]["ok"] for i in range(3, 8))
    assert by_id[None]["error"]["code"] == -32700
    assert by_id[9]["result"]["isError"] is True  # the body is over the size limit: refused, answered
