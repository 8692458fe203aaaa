"""``agent-link lease-git-hook``: the installed pre-commit hook refuses, in a real git
repository, a commit touching another session's exclusive lease (a rename on either name
too), lets the holder's own commit and unleased ones through, never replaces a foreign hook,
and lets commits go on without agent-link."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from agent_link_core.app import App
from agent_link_core.store import now_ms
from agent_link_leases.table import Project, claim

AGENT_LINK = str(Path(sys.executable).with_name("agent-link"))


def git(repo: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t",
            "GIT_COMMITTER_EMAIL": "t@example.com", **env}
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, env=full, timeout=120)


def agent_link(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([AGENT_LINK, *args], capture_output=True, text=True, cwd=cwd, env={**os.environ, **env}, timeout=120)


@pytest.fixture
def project(tmp_path: Path, app: App) -> Path:
    """A git repository with one commit (src/a.py, src/pkg/mod.py, notes/guide.txt) and the hook installed."""
    repo = tmp_path / "project"
    (repo / "src" / "pkg").mkdir(parents=True)
    (repo / "notes").mkdir()
    for name in ("src/a.py", "src/pkg/mod.py", "notes/guide.txt"):
        (repo / name).write_text("x\n")
    assert git(repo, "init", "-q").returncode == 0
    git(repo, "add", ".")
    assert git(repo, "commit", "-qm", "start").returncode == 0
    done = agent_link("lease-git-hook", "install", cwd=repo / "src")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"installed {repo.resolve() / '.git' / 'hooks' / 'pre-commit'}"
    root = Project(os.path.realpath(repo), False)
    claim(app.store, "codex:thread-1", root, ["src/pkg"], exclusive=True, reason="splitting it", ttl_ms=600_000, now=now_ms())
    claim(app.store, "team:shared", root, ["notes"], exclusive=False, reason=None, ttl_ms=600_000, now=now_ms())
    return repo


def test_a_commit_touching_anothers_lease_is_refused(project: Path) -> None:
    (project / "src" / "pkg" / "mod.py").write_text("changed\n")
    git(project, "add", "-A")
    refused = git(project, "commit", "-qm", "edit")
    assert refused.returncode != 0
    assert "leased by codex:thread-1 (src/pkg under" in refused.stderr and "splitting it" in refused.stderr
    assert "--no-verify" in refused.stderr
    assert git(project, "rev-list", "--count", "HEAD").stdout.strip() == "1"
    # the holder itself commits
    assert git(project, "commit", "-qm", "edit", AGENT_LINK_ADDRESS="codex:thread-1").returncode == 0


def test_a_rename_into_or_out_of_a_lease_is_refused(project: Path) -> None:
    assert git(project, "mv", "src/a.py", "src/pkg/a.py").returncode == 0
    assert "leased by codex:thread-1" in git(project, "commit", "-qm", "into").stderr
    git(project, "reset", "-q", "--hard")
    assert git(project, "mv", "src/pkg/mod.py", "src/mod.py").returncode == 0
    assert "leased by codex:thread-1" in git(project, "commit", "-qm", "out of").stderr


def test_unleased_and_shared_paths_commit(project: Path) -> None:
    (project / "src" / "a.py").write_text("changed\n")
    (project / "notes" / "guide.txt").write_text("changed\n")
    git(project, "add", "-A")
    done = git(project, "commit", "-qm", "free")
    assert done.returncode == 0, done.stderr


def test_without_agent_link_the_commit_goes_on(project: Path) -> None:
    hook = project / ".git" / "hooks" / "pre-commit"
    hook.write_text(hook.read_text().replace(AGENT_LINK, "/nonexistent/agent-link"))
    (project / "src" / "pkg" / "mod.py").write_text("changed\n")
    git(project, "add", "-A")
    assert git(project, "commit", "-qm", "edit", PATH="/usr/bin:/bin").returncode == 0


def test_install_keeps_a_foreign_hook_and_uninstall_removes_only_ours(project: Path, tmp_path: Path) -> None:
    hook = project / ".git" / "hooks" / "pre-commit"
    assert agent_link("lease-git-hook", "install", cwd=project).returncode == 0  # again: its own hook is rewritten
    assert agent_link("lease-git-hook", "uninstall", cwd=project).stdout.startswith("removed ")
    assert not hook.exists()
    hook.write_text("#!/bin/sh\nexit 0\n")
    refused = agent_link("lease-git-hook", "install", cwd=project)
    assert refused.returncode == 1 and "another pre-commit hook" in refused.stderr and "Traceback" not in refused.stderr
    assert agent_link("lease-git-hook", "uninstall", cwd=project).stdout.strip() == "no agent-link pre-commit hook here"
    assert hook.read_text() == "#!/bin/sh\nexit 0\n"
    assert agent_link("lease-git-hook", "install", "--force", cwd=project).returncode == 0
    outside = tmp_path / "not-a-repo"
    outside.mkdir()
    bad = agent_link("lease-git-hook", "install", cwd=outside)
    assert bad.returncode == 2 and "not in a git work tree" in bad.stderr and "Traceback" not in bad.stderr


def test_the_refusal_shows_others_text_escaped(app: App, tmp_path: Path) -> None:
    from agent_link_leases.githook import refusals

    root = os.path.realpath(tmp_path)
    claim(app.store, "team:dave", Project(root, False), ["n\a\u202eme.txt"], exclusive=True, reason="x\x1b[2J\a\u202eevil\nline",
          ttl_ms=600_000, now=now_ms())
    [line] = refusals(app.store.conn, [os.path.join(root, "n\a\u202eme.txt")], "team:erin", now_ms())
    assert line.isprintable() and "because: x\\u{001B}[2J\\u{0007}\\u{202E}evil\\u{000A}line" in line
    assert line.startswith(f"{root}/n\\u{{0007}}\\u{{202E}}me.txt: leased by team:dave (n\\u{{0007}}\\u{{202E}}me.txt under {root})")
