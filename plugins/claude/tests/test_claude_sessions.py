"""Discovery of Claude sessions: transcripts, live-session files, Desktop sidecars, merging,
caching, and the caller's identity (including the /clear rollover)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from agent_link_claude.harness import ClaudeHarness
from agent_link_core.directory import session_view
from agent_link_testing.host_program import HostProgram
from agent_link_claude.procs import parent_pid, proc_start, same_process
from agent_link_claude.sessions import SessionIndex, clean_label, config_dir, global_config_path

A = "11111111-1111-4111-8111-111111111111"
B = "22222222-2222-4222-8222-222222222222"
C = "33333333-3333-4333-8333-333333333333"


def index() -> SessionIndex:
    return SessionIndex(os.environ)


def by_id(sessions):
    return {s.id: s for s in sessions}


def test_config_dir_honours_claude_config_dir(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "elsewhere"))
    assert config_dir(os.environ) == str(tmp_path / "elsewhere")
    assert global_config_path(os.environ) == str(tmp_path / "elsewhere" / ".claude.json")
    monkeypatch.delenv("CLAUDE_CONFIG_DIR")
    assert config_dir(os.environ) == os.path.join(os.environ["HOME"], ".claude")
    assert global_config_path(os.environ) == os.path.join(os.environ["HOME"], ".claude.json")


def test_transcript_summary_reads_cwd_prompt_and_newest_title(fake_claude) -> None:
    fake_claude.write_transcript(A, "/work/alpha", prompt="Fix the\u202e parser\x07 now", title="Old name")
    path = fake_claude.write_transcript(B, "/work/beta", prompt="second", title="First", ai_title="AI name", padding=200_000)
    with path.open("a") as f:  # a later rename is appended at the end
        f.write('{"type":"custom-title","customTitle":"Renamed","sessionId":"%s"}\n' % B)
    found = by_id(index().sessions())
    assert found[A].title == "Old name" and found[A].cwd == "/work/alpha"
    assert found[A].address == f"claude:{A}" and found[A].surface == ("code",)
    assert found[B].title == "Renamed"  # read from the tail, 200 KB after the head
    assert found[B].cwd == "/work/beta"
    fake_claude.write_transcript(C, "/work/gamma", prompt="Fix the\u202e parser\x07\n now")
    assert by_id(index().sessions())[C].title == "Fix the parser now"  # invisible/control chars dropped


def test_clean_label_caps_and_drops_invisibles() -> None:
    assert clean_label("a\u200bb\u0000c\ud800d\ue000") == "a b c d"
    assert clean_label("x" * 500, 10) == "x" * 9 + "…"
    assert clean_label("   ") is None and clean_label(None) is None


def test_only_the_newest_limit_transcripts_are_read_and_summaries_are_cached(fake_claude) -> None:
    now = time.time()
    for i in range(30):
        fake_claude.write_transcript(f"{i:08d}-0000-4000-8000-000000000000", f"/p/{i}", title=f"t{i}", mtime=now - i)
    idx = index()
    sessions = idx.sessions(limit=5)
    assert len(sessions) == 30  # every transcript is listed ...
    assert idx.stats.transcripts_read == 5  # ... but only the newest five were opened
    titled = [s.title for s in sessions if s.title]
    assert titled == ["t0", "t1", "t2", "t3", "t4"]
    idx.sessions(limit=5)
    assert idx.stats.transcripts_read == 5  # unchanged files come from the cache
    newest = fake_claude.config_dir() / "projects" / "-p-0" / "00000000-0000-4000-8000-000000000000.jsonl"
    with newest.open("a") as f:
        f.write('{"type":"custom-title","customTitle":"changed","sessionId":"x"}\n')
    assert by_id(idx.sessions(limit=5))["00000000-0000-4000-8000-000000000000"].title == "changed"
    assert idx.stats.transcripts_read == 6


def test_thousands_of_transcripts_list_reading_only_the_page(fake_claude) -> None:
    # what makes the listing fast is the work it does, counted here (timings belong in bench/)
    root = fake_claude.config_dir() / "projects"
    for p in range(40):
        d = root / f"-proj-{p}"
        d.mkdir(parents=True)
        for i in range(75):
            (d / f"{p:04d}{i:04d}-0000-4000-8000-000000000000.jsonl").write_text(
                '{"type":"user","cwd":"/proj","message":{"role":"user","content":"hello"}}\n' + "x" * 2000 + "\n")
    idx = index()
    assert len(idx.sessions(limit=200)) == 3000
    assert idx.stats.transcripts_read == 200  # the page's transcripts, not all 3,000
    idx.sessions(limit=200)
    assert idx.stats.transcripts_read == 200  # the second listing reads none again


def test_live_session_counts_only_while_its_process_runs(fake_claude) -> None:
    fake_claude.write_transcript(A)
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        fake_claude.write_live(sleeper.pid, A)
        found = by_id(index().sessions())[A]
        assert found.loaded is True and found.extra["pid"] == sleeper.pid
        assert "live" in found.extra["sources"]
        # a reused pid: same number, another start time
        fake_claude.write_live(sleeper.pid, A, proc="1")
        assert by_id(SessionIndex(os.environ).sessions())[A].loaded is False
    finally:
        sleeper.kill()
        sleeper.wait()
    fake_claude.write_live(sleeper.pid, A)  # the process is gone
    assert by_id(SessionIndex(os.environ).sessions())[A].loaded is False


def test_live_session_without_transcript_is_listed(fake_claude) -> None:
    # `claude -p` writes the transcript only after the first turn; the live file exists from the start
    fake_claude.write_live(os.getpid(), B, "/work/new")
    [session] = index().sessions()
    assert session.address == f"claude:{B}" and session.loaded and session.cwd == "/work/new"
    assert session.title == "proj-1a"  # the live file's derived name, as nothing better is known


def test_process_helpers_agree_with_proc() -> None:
    me = os.getpid()
    assert parent_pid(me) == os.getppid()
    assert proc_start(me) and same_process(me, proc_start(me))
    assert not same_process(me, "not-my-start")
    assert not same_process(2**22 + 12345, None)


@pytest.mark.parametrize("root_name", ["linux_desktop_root", "mac_desktop_root"])
def test_desktop_sidecars_merge_with_transcripts_and_keep_prior_ids_as_aliases(fake_claude, root_name: str) -> None:
    root = getattr(fake_claude, root_name)()
    fake_claude.write_transcript(A, "/work/desk", title="transcript title", mtime=time.time() - 100)
    fake_claude.write_transcript(C, "/work/desk", title="old transcript", mtime=time.time() - 500)
    fake_claude.write_sidecar(root, "aaaa-1111", cli=A, prior=(C,), title="Desktop title")
    fake_claude.write_sidecar(root, "bbbb-2222", surface_dir="local-agent-mode-sessions", cli=None, title="Cowork task", archived=True)
    idx = index()
    listed = by_id(idx.sessions())
    assert set(listed) == {A, "bbbb-2222"}  # C's transcript belongs to A's sidecar
    desk = listed[A]
    assert desk.title == "Desktop title" and desk.surface == ("code",)
    assert {C, f"local_{C}", "local_aaaa-1111", f"local_{A}"} <= set(desk.aliases)
    assert desk.extra["sessionId"] == "local_aaaa-1111" and desk.extra["priorCliSessionIds"] == [C]
    cowork = listed["bbbb-2222"]
    assert cowork.surface == ("desktop",) and cowork.archived and cowork.address == "claude:bbbb-2222"
    assert cowork.extra["cliSessionId"] is None
    # lookups by any id reach the current session
    for ident in (A, C, f"local_{C}", "local_aaaa-1111", f"local_{A}"):
        found = idx.find(ident)
        assert found is not None and found.address == f"claude:{A}", ident
    assert idx.find("local_bbbb-2222").archived


def test_odd_bytes_in_paths_and_records_never_break_the_output(fake_claude) -> None:
    path = fake_claude.write_transcript(A, "/work/odd")
    path.write_text(path.read_text().replace("/work/odd", "/work/\\ud800odd"))  # a lone surrogate escape
    odd_dir = os.fsencode(fake_claude.config_dir() / "projects") + b"/bad-\xff"
    os.makedirs(odd_dir)
    with open(odd_dir + f"/{B}.jsonl".encode(), "w") as f:
        f.write('{"type":"user","cwd":"/x","message":{"role":"user","content":"hi"}}\n')
    found = by_id(index().sessions())
    assert found[A].cwd == "/work/?odd" and set(found) == {A, B}
    for session in found.values():
        json.dumps(session_view(session), ensure_ascii=False).encode("utf-8")


def test_find_by_transcript_only_and_unknown_ids(fake_claude) -> None:
    fake_claude.write_transcript(B, "/w")
    idx = index()
    assert idx.find(B).address == f"claude:{B}"
    assert idx.find(f"local_{B}").address == f"claude:{B}"
    assert idx.find("nope") is None
    assert idx.find("../../etc") is None and idx.find("*") is None


@pytest.mark.anyio
async def test_harness_lists_and_reports_provider(fake_claude) -> None:
    harness = ClaudeHarness()
    listing = await harness.list_sessions()
    assert listing.sessions == [] and listing.provider["available"] is False
    assert listing.provider["reason"] == "no_claude_data"
    fake_claude.write_transcript(A)
    fake_claude.write_sidecar(fake_claude.linux_desktop_root(), "cccc", cli=None, archived=True)
    listing = await harness.list_sessions()
    assert [s.id for s in listing.sessions] == [A] and listing.provider["available"]
    assert {s.id for s in (await harness.list_sessions(include_archived=True)).sessions} == {A, "cccc"}
    assert (await harness.get_session("cccc")).archived


@pytest.mark.anyio
async def test_attached_harness_uses_the_apps_environment_and_state_dir(fake_claude, monkeypatch, tmp_path) -> None:
    # an App built with its own environment: discovery and the channel registry follow it,
    # not this process's os.environ
    from agent_link_claude.channel import GateState, register
    from agent_link_core.app import App

    fake_claude.write_transcript(A)  # in os.environ's config dir
    mine, elsewhere, state = os.environ["CLAUDE_CONFIG_DIR"], tmp_path / "other-claude", tmp_path / "other-state"
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(elsewhere))
    fake_claude.write_transcript(B)
    env = {**os.environ, "AGENT_LINK_STATE_DIR": str(state)}
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", mine)
    app = App.create(env=env)
    try:
        harness = app.harnesses["claude"]
        assert harness.app is app and harness.state_dir() == str(state)
        assert [s.id for s in (await harness.list_sessions()).sessions] == [B]
        register(state, B, GateState(True, "open", "x"))
        assert harness.channel_sessions() == {B} and (await harness.get_session(B)).receive["push"] == "channel"
        health = harness.health()
        assert health["configDir"] == str(elsewhere) and health["channel"]["activeBridges"] == [B]
    finally:
        await app.aclose()
    # a harness used outside an App reads os.environ and sees no channel registry
    bare = ClaudeHarness()
    assert bare.state_dir() is None and bare.channel_sessions() == frozenset()
    assert [s.id for s in (await bare.list_sessions()).sessions] == [A]


# -- identity ----------------------------------------------------------------------------------


def test_caller_from_environment() -> None:
    harness = ClaudeHarness()
    caller = harness.identify_caller({"claudecode/toolUseId": "toolu_1"}, {"CLAUDE_CODE_SESSION_ID": A})
    assert (caller.address, caller.source, caller.host, caller.tool_call_id) == (f"claude:{A}", "env", "claude", "toolu_1")
    assert caller.evidence is None and not caller.verified  # a variable names a session, never proves one
    assert harness.identify_caller({}, {"CLAUDE_SESSION_ID": B}).address == f"claude:{B}"
    assert harness.identify_caller({}, {}) is None
    assert harness.identify_caller({}, {"CLAUDE_CODE_SESSION_ID": "bad id!"}) is None
    # another host's server that inherited the variable does not claim to be this session
    assert harness.identify_caller({}, {"CLAUDE_CODE_SESSION_ID": A, "AGENT_LINK_HOST": "codex"}) is None
    # _meta carries no session id on Claude Code 2.1.197; nothing is guessed from it
    assert harness.identify_caller({"sessionId": A, "threadId": A}, {}) is None


IDENTIFY = ("import json, os\nfrom agent_link_claude.harness import ClaudeHarness\n"
            "c = ClaudeHarness().identify_caller({}, os.environ)\nprint(json.dumps([c.address, c.source, c.evidence is not None]))")


def test_caller_follows_clear_through_the_parent_live_file(fake_claude, tmp_path) -> None:
    # After /clear the server's environment keeps the old id; the claude process (the
    # server's parent: here a process of a program named claude) rewrites its live-session
    # file with the new one. Only such a process proves the session (Caller.evidence).
    env = {**os.environ, "CLAUDE_CODE_SESSION_ID": A, "CLAUDE_CONFIG_DIR": str(fake_claude.config_dir())}

    def identify(host: HostProgram) -> list[object]:
        done = host.run([sys.executable, "-c", IDENTIFY], env)
        assert done["rc"] == 0, done["stderr"]
        return list(json.loads(done["stdout"]))

    with HostProgram(tmp_path / "bin", "claude") as claude:
        fake_claude.write_live(claude.pid, B)
        assert identify(claude) == [f"claude:{B}", "current_session", True]
        fake_claude.write_live(claude.pid, C)  # another /clear
        assert identify(claude) == [f"claude:{C}", "current_session", True]
        # a file left by an earlier process with the same pid is not believed
        fake_claude.write_live(claude.pid, B, proc="12")
        assert identify(claude) == [f"claude:{A}", "env", False]
        os.unlink(fake_claude.config_dir() / "sessions" / f"{claude.pid}.json")
        assert identify(claude) == [f"claude:{A}", "env", False]
    # issue 29: a plain process that writes a record for itself is no Claude Code process
    with HostProgram(tmp_path / "plain", "python3") as plain:
        fake_claude.write_live(plain.pid, B)
        assert identify(plain) == [f"claude:{A}", "env", False]
