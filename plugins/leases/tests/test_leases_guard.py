"""The PreToolUse edit guard: an edit or write of a path another session holds exclusively is
refused naming the holder; reads, shared leases, own leases and unleased paths pass."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from agent_link_core.app import App
from agent_link_core.store import Store, now_ms
from agent_link_leases.guard import check, edit_targets
from agent_link_leases.table import Project, claim
from agent_link_leases.writes import patch_targets, shell_targets

ALICE, BOB = "test:alice", "test:bob"


def call(tool: str, repo: str, **tool_input: Any) -> dict[str, Any]:
    return {"hook_event_name": "PreToolUse", "tool_name": tool, "tool_input": tool_input, "cwd": repo}


@pytest.fixture
def leased(app: App, repo: str) -> App:
    root = Project(repo, False)
    claim(app.store, ALICE, root, ["src/pkg"], exclusive=True, reason="moving modules", ttl_ms=60_000, now=now_ms())
    claim(app.store, ALICE, root, ["guide/*.md"], exclusive=False, reason=None, ttl_ms=60_000, now=now_ms())
    return app


def test_an_edit_of_anothers_exclusive_lease_is_denied(leased: App, repo: str) -> None:
    for tool, key in (("Edit", "file_path"), ("Write", "file_path"), ("MultiEdit", "file_path"), ("NotebookEdit", "notebook_path")):
        out = check(call(tool, repo, **{key: "src/pkg/mod.py"}), BOB, leased.store, now_ms())
        assert out is not None, tool
        hook = out["hookSpecificOutput"]
        assert hook["hookEventName"] == "PreToolUse" and hook["permissionDecision"] == "deny"
        reason = hook["permissionDecisionReason"]
        assert "test:alice holds src/pkg" in reason and "moving modules" in reason and "message_agent" in reason
    absolute = check(call("Write", repo, file_path=os.path.join(repo, "src", "pkg", "new.py")), BOB, leased.store, now_ms())
    assert absolute is not None


@pytest.mark.parametrize(("tool", "path", "caller"), [
    ("Read", "src/pkg/mod.py", BOB),  # reads are never blocked
    ("Edit", "src/pkg/mod.py", ALICE),  # the holder's own calls pass
    ("Edit", "guide/x.md", BOB),  # a shared lease
    ("Edit", "src/a.py", BOB),  # not leased
    ("Edit", "../outside.py", BOB),  # outside every project root
])
def test_what_passes(leased: App, repo: str, tool: str, path: str, caller: str) -> None:
    assert check(call(tool, repo, file_path=path), caller, leased.store, now_ms()) is None


def test_a_symlinked_spelling_is_caught(leased: App, repo: str) -> None:
    os.symlink(Path(repo, "src", "pkg"), Path(repo, "alias"))
    assert check(call("Edit", repo, file_path="alias/mod.py"), BOB, leased.store, now_ms()) is not None


def test_an_expired_lease_no_longer_blocks(leased: App, repo: str) -> None:
    assert check(call("Edit", repo, file_path="src/pkg/mod.py"), BOB, leased.store, now_ms() + 60_001) is None


def test_no_database_or_no_table_lets_it_pass(repo: str, tmp_path: Path) -> None:
    assert check(call("Edit", repo, file_path="src/pkg/mod.py"), BOB, None, now_ms()) is None
    bare = Store(tmp_path / "bare.db")  # a database no leases plugin has opened
    assert check(call("Edit", repo, file_path="src/pkg/mod.py"), BOB, bare, now_ms()) is None
    bare.close()


def test_malformed_calls_name_no_target(repo: str) -> None:
    assert edit_targets({"tool_name": "Edit", "tool_input": "x"}) == []
    assert edit_targets({"tool_name": "Edit", "tool_input": {"file_path": 3}}) == []
    assert edit_targets({"tool_name": "Edit", "tool_input": {"file_path": "a\0b"}, "cwd": repo}) == []


def test_codex_patches_and_shell_writes_are_denied(leased: App, repo: str) -> None:
    patch = "*** Begin Patch\n*** Update File: src/a.py\n*** Move to: src/pkg/a.py\n@@\n-x\n+y\n*** End Patch\n"
    for tool, command in (("apply_patch", patch),  # a move into the lease: both names count
                          ("apply_patch", "*** Begin Patch\n*** Delete File: src/pkg/mod.py\n*** End Patch\n"),
                          ("Bash", "echo x > src/pkg/out.txt"),
                          ("Bash", "cd src && mv a.py pkg/b.py"),
                          ("Bash", "rm -rf src"),  # a directory holding the lease
                          ("Bash", "sed -i s/a/b/ src/pkg/mod.py")):
        out = check(call(tool, repo, command=command), BOB, leased.store, now_ms())
        assert out is not None and "test:alice holds src/pkg" in out["hookSpecificOutput"]["permissionDecisionReason"], command
    passing: tuple[tuple[str, object], ...] = (
        ("Bash", "cat src/pkg/mod.py | grep x"), ("Bash", "ls src > listing.txt"),
        ("apply_patch", "*** Begin Patch\n*** Add File: src/b.py\n+x\n*** End Patch\n"), ("Bash", 3))
    for tool, given in passing:
        assert check(call(tool, repo, command=given), BOB, leased.store, now_ms()) is None, given


@pytest.mark.parametrize(("command", "written"), [
    ("echo hi > a.txt", ["a.txt"]),
    ("echo hi >> b.txt 2>&1", ["b.txt"]),
    ("cat x | tee -a c.txt d.txt", ["c.txt", "d.txt"]),
    ("cd src && rm -rf pkg; mv a b", ["src/pkg", "src/a", "src/b"]),
    ("cp a b c/", ["c"]),
    ("sed -i s/a/b/ f.py g.py", ["f.py", "g.py"]),
    ("sed -i -e s/a/b/ f.py", ["f.py"]),
    ("perl -pi -e s/a/b/ f.py", ["f.py"]),
    ("git mv a b", ["a", "b"]),
    ("FOO=1 mkdir -p d/e", ["d/e"]),
    ("dd if=/dev/zero of=disk.img", ["disk.img"]),
    ("cat <in.txt >out.txt", ["out.txt"]),
    ("ls &> all.log", ["all.log"]),
    ("echo 1\necho 2 > two", ["two"]),
    ("ls -la; cat foo", []),
    ('echo "a > b"', []),  # quoted: no redirection
    ("echo $X > $Y", []),  # unknowable target
    ("echo hi > $(mktemp)", []),
    ("OUT=logs/run.txt; echo hi > $OUT", ["logs/run.txt"]),
    ("export D=src && touch ${D}/n.py", ["src/n.py"]),
    ("D=a cd $D; touch x", ["x"]),  # a prefix assignment is not set for the command's own words
    ("echo > $AGENT_LINK_TEST_TARGET/x", ["from-env/x"]),
    ("cd $NOWHERE_SET && touch x", ["x"]),  # an unknown cd: the directory stays
    ("git checkout main -- a.py b.py", ["a.py", "b.py"]),
    ("git restore --staged a.py", ["a.py"]),
    ("git checkout main", []),
    ("{ rm a; } && ! touch b", ["a", "b"]),
    ("echo hi >/dev/null", []),
    ("echo 'unclosed", []),
    ("cat > x.py <<'EOF'\nprint(\"it's\")\nrm -rf data\nEOF\ntouch y", ["x.py", "y"]),  # a here-document's body is data
    ("cat <<-END >> log\n\tmv a b\n\tEND", ["log"]),
])
def test_shell_targets(command: str, written: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENT_LINK_TEST_TARGET", "from-env")
    monkeypatch.delenv("NOWHERE_SET", raising=False)
    assert shell_targets(command, "/r") == [f"/r/{w}" for w in written]


def test_globs_expand_against_existing_files(tmp_path: Path) -> None:
    here = str(tmp_path / "dir[1]")  # the working directory's name is no pattern
    for name in ("a.py", "b.py", "c.txt", ".hidden.py", "sub/d.py"):
        Path(here, name).parent.mkdir(parents=True, exist_ok=True)
        Path(here, name).write_text("")
    assert shell_targets("rm *.py", here) == [f"{here}/a.py", f"{here}/b.py"]  # as the shell: no dot files
    assert shell_targets("sed -i s/a/b/ sub/?.py [ab].py", here) == [f"{here}/sub/d.py", f"{here}/a.py", f"{here}/b.py"]
    assert shell_targets("touch *.rs", here) == []  # matches nothing: nothing known is written
    assert shell_targets("cat *.py > all.txt", here) == [f"{here}/all.txt"]  # a glob read, not written
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "e.py").write_text("")
    assert shell_targets(f"rm {plain}/*.py", here) == [f"{plain}/e.py"]  # an absolute glob


def test_patch_targets() -> None:
    patch = "*** Begin Patch\n*** Add File: n.py\n+x\n*** Update File: a.py\n*** Move to: d/b.py\n@@\n-x\n+y\n*** Delete File: c.py\n*** End Patch"
    assert patch_targets(patch, "/r") == ["/r/n.py", "/r/a.py", "/r/d/b.py", "/r/c.py"]


def test_a_holders_reason_and_a_file_name_reach_the_model_escaped(app: App, repo: str) -> None:
    odd = "src/n\a\u202eme.py"
    claim(app.store, ALICE, Project(repo, False), [odd], exclusive=True, reason="x\x1b[2J\a\u202eevil\nline", ttl_ms=60_000,
          now=now_ms())
    out = check(call("Write", repo, file_path=odd), BOB, app.store, now_ms())
    assert out is not None
    reason = out["hookSpecificOutput"]["permissionDecisionReason"]
    assert "because: x\\u{001B}[2J\\u{0007}\\u{202E}evil\\u{000A}line" in reason
    assert "src/n\\u{0007}\\u{202E}me.py" in reason and reason.isprintable()
