"""``approvals apply`` never loses an edit another process makes to the same file.

Deterministic cases inject the other process's edit at each moment of the write (after the
read, just before the swap, into the old file right after the swap, a file appearing); one
stress test runs a real writer process beside repeated applies, a bounded number of lines."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from agent_link_approvals import files, service
from agent_link_approvals.files import ChangedWhileApplying, update_file
from agent_link_approvals.manifests import read_claude_plugin, read_codex_plugin
from agent_link_approvals.toollist import ToolInfo
from click.testing import Result

PID = "codex-agent-link@agent-link"
SRV = "codex-agent-link"
RULE = "mcp__plugin_agent-link_codex-agent-link"

Run = Callable[..., Result]


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith((".tmp", ".bak", ".concurrent")))


def edit_once(monkeypatch: pytest.MonkeyPatch, edit: Callable[[Path], None], *, times: int = 1) -> list[int]:
    """The other process edits the file ``times`` times, each just before agent-link reads it
    again ahead of the swap (the moment the old check came too early for)."""
    real = files._current
    done: list[int] = []

    def current(target: Path) -> bytes | None:
        if len(done) < times:
            done.append(1)
            edit(target)
        return real(target)

    monkeypatch.setattr(files, "_current", current)
    return done


def append_line(line: str) -> Callable[[Path], None]:
    def edit(target: Path) -> None:
        with open(target, "a", encoding="utf-8") as fh:
            fh.write(line)
    return edit


def put_first(current: bytes | None) -> bytes:
    """A change that is not an append (so the file is replaced, not appended to)."""
    return b"ours = 3\n" + (current or b"")


def add_ours(current: bytes | None) -> bytes:
    return json.dumps({**json.loads(current or b"{}"), "ours": 1}).encode()


def test_an_edit_before_the_swap_is_kept_and_the_change_planned_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "config.toml"
    path.write_text("a = 1\n")
    edit_once(monkeypatch, append_line("b = 2\n"))
    seen: list[bytes | None] = []

    def plan(current: bytes | None) -> bytes:
        seen.append(current)
        return (current or b"") + b"ours = 3\n"

    done = update_file(path, plan)
    assert path.read_text() == "a = 1\nb = 2\nours = 3\n"
    assert seen == [b"a = 1\n", b"a = 1\nb = 2\n"] and done.attempts == 2 and done.written
    assert done.backup is not None and done.backup.read_text() == "a = 1\nb = 2\n"
    assert leftovers(tmp_path) == [done.backup.name]


def test_a_replacement_at_the_moment_of_the_swap_is_swapped_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another process renames its own file over the config between agent-link's last read
    and its swap (the same bytes even, so only the file's identity tells)."""
    path = tmp_path / "settings.json"
    path.write_text("{}\n")
    real_exchange = files._exchange
    calls: list[int] = []

    def exchange(a: Path, b: Path) -> bool:
        if not calls:
            other = tmp_path / "theirs.tmp"
            other.write_text('{"theirs": true}\n')
            os.replace(other, b)
        calls.append(1)
        return real_exchange(a, b)

    monkeypatch.setattr(files, "_exchange", exchange)
    done = update_file(path, add_ours)
    assert json.loads(path.read_text()) == {"theirs": True, "ours": 1} and done.attempts == 2
    assert len(calls) == 3  # swap, swap back, swap again


def race_the_swap(monkeypatch: pytest.MonkeyPatch, scratch: Path) -> None:
    """The race no file system closes: a writer without a lock replaces the file just before agent-link's swap
    (``{"w0": 0}``), then reads agent-link's version and replaces it again before the swap back (adding ``w1``)."""
    real_exchange = files._exchange
    calls: list[int] = []

    def exchange(a: Path, b: Path) -> bool:
        if not calls:
            (scratch / "w.tmp").write_text('{"w0": 0}\n')
            os.replace(scratch / "w.tmp", b)
        swapped = real_exchange(a, b)
        if not calls:
            (scratch / "w.tmp").write_text(json.dumps({**json.loads(b.read_text()), "w1": 1}))
            os.replace(scratch / "w.tmp", b)
        calls.append(1)
        return swapped

    monkeypatch.setattr(files, "_exchange", exchange)


def test_a_version_written_over_agent_links_between_swap_and_swap_back_is_kept_and_said(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """:func:`race_the_swap`: the writer's first version goes back in place, its second is kept beside the file, and
    the update says where."""
    path = tmp_path / "settings.json"
    path.write_text("{}\n")
    race_the_swap(monkeypatch, tmp_path)
    done = update_file(path, add_ours)
    assert json.loads(path.read_text()) == {"w0": 0, "ours": 1} and done.written
    [kept] = done.kept
    assert kept.name.endswith(".concurrent") and json.loads(kept.read_text()) == {"ours": 1, "w1": 1}


def test_a_write_into_the_old_file_right_after_the_swap_is_swapped_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A process that opened the config before the swap writes into it right after: the line
    would land in the file agent-link displaced and be lost (a change that replaces the file)."""
    path = tmp_path / "config.toml"
    path.write_text("a = 1\n")
    real_exchange = files._exchange
    calls: list[int] = []

    def exchange(a: Path, b: Path) -> bool:
        swapped = real_exchange(a, b)
        if not calls:
            append_line("late = 2\n")(a)  # `a` now names the displaced, old file
        calls.append(1)
        return swapped

    monkeypatch.setattr(files, "_exchange", exchange)
    done = update_file(path, put_first)
    assert path.read_text() == "ours = 3\na = 1\nlate = 2\n" and done.attempts == 2
    assert leftovers(tmp_path) == [done.backup.name] if done.backup else False


def test_without_an_exchange_a_write_into_the_old_file_is_put_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Systems without renameat2(RENAME_EXCHANGE): rename, then undo when the old file changed."""
    path = tmp_path / "config.toml"
    path.write_text("a = 1\n")
    monkeypatch.setattr(files, "_exchange", lambda a, b: False)
    real_replace = os.replace
    calls: list[int] = []

    def replace(src: Any, dst: Any) -> None:
        held = Path(dst).read_bytes() if not calls else None
        old = os.open(dst, os.O_WRONLY | os.O_APPEND) if not calls else None
        real_replace(src, dst)
        if old is not None:
            os.write(old, b"late = 2\n")  # the other process's fd still names the old file
            os.close(old)
            assert held == b"a = 1\n"
        calls.append(1)

    monkeypatch.setattr(os, "replace", replace)
    done = update_file(path, put_first)
    assert path.read_text() == "ours = 3\na = 1\nlate = 2\n" and done.attempts == 2


def test_a_writer_that_opened_the_file_before_an_append_keeps_its_late_line(tmp_path: Path) -> None:
    """A process opens the config, agent-link appends its tables, and only then the process
    writes its line (a shell's ``>>`` paused between open and write on a loaded machine): the
    line lands in the config, after agent-link's, since agent-link appended into the same
    file instead of swapping in a copy."""
    path = tmp_path / "config.toml"
    path.write_text("a = 1\n")
    late = os.open(path, os.O_WRONLY | os.O_APPEND)
    try:
        done = update_file(path, lambda cur: (cur or b"") + b"ours = 3\n")
        os.write(late, b"late = 2\n")
    finally:
        os.close(late)
    assert path.read_text() == "a = 1\nours = 3\nlate = 2\n" and done.written and done.attempts == 1
    assert done.backup is not None and done.backup.read_text() == "a = 1\n"
    assert leftovers(tmp_path) == [done.backup.name]


def test_an_append_keeps_the_files_identity_and_mode(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text("a = 1\n")
    path.chmod(0o640)
    before = path.stat()
    update_file(path, lambda cur: (cur or b"") + b"ours = 3\n")
    after = path.stat()
    assert (after.st_ino, after.st_mode) == (before.st_ino, before.st_mode)


def test_an_append_to_a_file_replaced_meanwhile_is_planned_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another process renames its own file over the config while agent-link plans its append."""
    path = tmp_path / "config.toml"
    path.write_text("a = 1\n")

    def replace(target: Path) -> None:
        other = tmp_path / "theirs.tmp"
        other.write_text("a = 1\n")  # the same bytes: only the file's identity tells
        os.replace(other, target)

    edit_once(monkeypatch, replace)
    done = update_file(path, lambda cur: (cur or b"") + b"ours = 3\n")
    assert path.read_text() == "a = 1\nours = 3\n" and done.attempts == 2


def test_a_file_appearing_meanwhile_is_not_replaced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "settings.json"
    edit_once(monkeypatch, lambda target: target.write_text('{"theirs": 1}\n'))
    done = update_file(path, add_ours)
    assert json.loads(path.read_text()) == {"theirs": 1, "ours": 1} and done.attempts == 2


def test_a_folder_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    folder = tmp_path / "config.toml"
    folder.mkdir()
    with pytest.raises(files.ConfigFileError, match="not a regular file"):
        update_file(folder, lambda cur: b"x")
    assert leftovers(tmp_path) == [] and folder.is_dir()


def test_a_file_that_keeps_changing_is_left_as_the_other_process_made_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "config.toml"
    path.write_text("a = 1\n")
    counter = iter(range(100))
    edit_once(monkeypatch, lambda target: append_line(f"b{next(counter)} = 0\n")(target), times=100)
    with pytest.raises(ChangedWhileApplying, match=r"\(8 tries\).*other change was kept"):
        update_file(path, lambda cur: (cur or b"") + b"ours = 3\n")
    assert "ours" not in path.read_text() and path.read_text().count("\n") == 1 + files.UPDATE_ATTEMPTS
    assert leftovers(tmp_path) == []


def test_apply_cli_keeps_an_edit_made_while_it_writes(run: Run, tmp_path: Path, fake_tools: list[str],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "config.toml"
    config.write_text(f'[plugins."{PID}"]\nenabled = true\n[plugins."{PID}".mcp_servers.{SRV}]\n'
                      'default_tools_approval_mode = "prompt"\n')
    edit_once(monkeypatch, append_line("# added by Codex meanwhile\n[profiles.fast]\nmodel = \"o9\"\n"))
    result = run("approvals", "apply", "--codex-config", config, "--json")
    data = json.loads(result.stdout)["codex"]
    assert result.exit_code == 0 and data["written"] is True
    text = config.read_text()
    assert "# added by Codex meanwhile\n[profiles.fast]\nmodel = \"o9\"\n" in text
    assert tomllib.loads(text)["profiles"]["fast"]["model"] == "o9"
    assert "model = \"o9\"" in data["diff"]  # the diff shown is the one written, on top of the edit


def test_apply_cli_says_where_a_version_written_over_its_own_was_kept(run: Run, tmp_path: Path, fake_tools: list[str],
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    settings = tmp_path / "settings.json"
    settings.write_text("{}\n")
    race_the_swap(monkeypatch, tmp_path)
    data = json.loads(run("approvals", "apply", "--claude-settings", settings, "--json").stdout)["claude"]
    [kept] = data["keptBeside"]
    assert kept.endswith(".concurrent") and json.loads(Path(kept).read_text())["w1"] == 1
    (tmp_path / "again.json").write_text("{}\n")
    race_the_swap(monkeypatch, tmp_path)
    said = run("approvals", "apply", "--claude-settings", tmp_path / "again.json").stdout
    assert "another program rewrote the file as agent-link wrote it; its version is kept as" in said and ".concurrent: merge it" in said


def test_apply_cli_refuses_a_file_that_keeps_changing_also_in_json(run: Run, tmp_path: Path, fake_tools: list[str],
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    settings = tmp_path / "settings.json"
    settings.write_text('{"n": 0}\n')
    counter = iter(range(1, 100))
    edit_once(monkeypatch, lambda target: target.write_text(json.dumps({"n": next(counter)}) + "\n"), times=100)
    result = run("approvals", "apply", "--claude-settings", settings, "--json")
    assert result.exit_code == 1
    data = json.loads(result.stdout)
    assert data["complete"] is False and data["error"]["kind"] == "changed"
    assert result.stderr.count("\n") == 1 and "changed while agent-link was applying" in result.stderr
    assert json.loads(settings.read_text()) == {"n": files.UPDATE_ATTEMPTS}
    assert leftovers(tmp_path) == []


WRITER = r"""
import os, sys, time
path, mode, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
for i in range(count):
    if mode.startswith("append"):  # open, append one line, close: how people and shells edit
        fd = os.open(path, os.O_WRONLY | os.O_APPEND)
        if mode == "append-paused":  # the pause a loaded machine may put between open and write
            time.sleep(0.01)
        os.write(fd, f"# w{i}\n".encode())
        os.close(fd)
    else:  # read, modify, replace: how Claude Code rewrites settings.json
        import json
        with open(path) as fh:
            data = json.load(fh)
        data[f"w{i}"] = i
        tmp = f"{path}.{os.getpid()}.w"
        with open(tmp, "w") as fh:
            json.dump(data, fh, indent=2)
        os.replace(tmp, path)
    time.sleep(0.002)
"""


def _tools() -> list[ToolInfo]:
    return [ToolInfo("list_agents", True, False, False), ToolInfo("message_agent", False, False, False)]


@pytest.mark.parametrize("host", ["codex", "claude"])
def test_a_real_concurrent_writer_loses_nothing(tmp_path: Path, host: str) -> None:
    """A writer process edits the file 300 times while applies run (each with a new plugin id,
    so each has something to add): every edit of the writer is in the file at the end (or, for
    a writer that replaces the file, in a version kept beside it), and every apply either wrote
    its change or refused."""
    count = 300
    if host == "codex":
        path = tmp_path / "config.toml"
        path.write_text("# start\n")
    else:
        path = tmp_path / "settings.json"
        path.write_text("{}\n")
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(path), "append" if host == "codex" else "replace",
                               str(count)])
    outcomes: list[str] = []
    try:
        n = 0
        while writer.poll() is None and n < 500:
            n += 1
            try:
                if host == "codex":
                    out = service.apply_codex(path, _tools(), read_codex_plugin(), plugin_id=f"p{n}@m")
                    outcomes.append("written" if out.report["written"] else "nothing")
                else:
                    plugin = read_claude_plugin()
                    plugin.plugin = f"p{n}"
                    cout = service.apply_claude(path, _tools(), plugin)
                    outcomes.append("written" if cout.report["written"] else "nothing")
            except ChangedWhileApplying:
                outcomes.append("refused")
    finally:
        assert writer.wait(timeout=120) == 0
    text = path.read_text()
    if host == "codex":
        lines = [line for line in text.splitlines() if line.startswith("# w")]
        assert lines == sorted(lines, key=lambda s: int(s[3:])) and len(lines) == count
        data = tomllib.loads(text)
        written = [i for i, o in enumerate(outcomes, 1) if o == "written"]
        assert all(f"p{i}@m" in data["plugins"] for i in written)
        assert [p for p in leftovers(tmp_path) if not p.endswith(".bak")] == []
    else:
        # A writer that replaces the file without a lock (as Claude Code does) can, once in many thousand rounds on a
        # loaded machine, replace it just before the swap and read agent-link's version in the moment before agent-link
        # swaps the writer's file back; no file system offers a compare-and-swap of a path. That writer's next version
        # is then kept beside the file as ``.concurrent`` (files._keep_if_not), never deleted: every edit is in one.
        kept = [json.loads(p.read_text()) for p in tmp_path.iterdir() if p.name.endswith(".concurrent")]
        found = {k for d in (json.loads(text), *kept) for k in d if k.startswith("w")}
        assert found == {f"w{i}" for i in range(count)}
        assert [p for p in leftovers(tmp_path) if not p.endswith((".bak", ".concurrent"))] == []
    assert outcomes and "nothing" not in outcomes


APPLIER = r"""
import json, sys
from pathlib import Path
from agent_link_approvals import service
from agent_link_approvals.files import ChangedWhileApplying
from agent_link_approvals.manifests import read_codex_plugin
from agent_link_approvals.toollist import ToolInfo

path, name, count = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
tools = [ToolInfo("list_agents", True, False, False), ToolInfo("message_agent", False, False, False)]
plugin = read_codex_plugin()
outcomes = {}
for n in range(count):
    pid = f"{name}-{n}@m"
    try:
        out = service.apply_codex(path, tools, plugin, plugin_id=pid)
        outcomes[pid] = "written" if out.report["written"] else "nothing"
    except ChangedWhileApplying:
        outcomes[pid] = "refused"
print(json.dumps(outcomes))
"""


def test_many_processes_appending_at_once_lose_no_line(tmp_path: Path) -> None:
    """Several processes append lines to a Codex config while several ``apply`` processes
    append their tables to it, all at once: every line of every writer is in the file once and
    in its order, every table an apply reports written is there, and the file parses. The
    writers pause between open and write, as a loaded machine may make them."""
    writers, lines, appliers, applies = 6, 60, 3, 15
    path = tmp_path / "config.toml"
    path.write_text("# start\n")
    procs = [subprocess.Popen([sys.executable, "-c", WRITER.replace("# w{i}", f"# w{w}-{{i}}"), str(path), "append-paused",
                               str(lines)]) for w in range(writers)]
    applying = [subprocess.Popen([sys.executable, "-c", APPLIER, str(path), f"a{a}", str(applies)], stdout=subprocess.PIPE,
                                 text=True) for a in range(appliers)]
    outcomes: dict[str, str] = {}
    try:
        for proc in applying:
            out, _ = proc.communicate(timeout=600)
            assert proc.returncode == 0
            outcomes.update(json.loads(out))
    finally:
        assert all(proc.wait(timeout=600) == 0 for proc in procs)
    text = path.read_text()
    for w in range(writers):
        mine = [line for line in text.splitlines() if line.startswith(f"# w{w}-")]
        assert mine == [f"# w{w}-{i}" for i in range(lines)], f"writer {w}: {len(mine)} of {lines} lines"
    data = tomllib.loads(text)
    written = [pid for pid, outcome in outcomes.items() if outcome == "written"]
    assert written and all(pid in data["plugins"] for pid in written)
    assert len(outcomes) == appliers * applies and "nothing" not in outcomes.values()
    assert [p for p in leftovers(tmp_path) if not p.endswith(".bak")] == []
