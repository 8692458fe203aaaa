"""What the host plugins share of ``agent-link install|uninstall <host>`` (:mod:`agent_link_hostkit.host_install`):
staging a plugin folder with the executable written into its launcher, running steps (dry run,
failures, steps with nothing to do), and the groups host plugins fill."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from agent_link_core.errors import AgentLinkError
from agent_link_hostkit import host_install
from agent_link_hostkit.host_install import LAUNCHER_LINE, Step


def plugin_source(root: Path) -> Path:
    (root / "hooks").mkdir(parents=True)
    (root / "manifest.json").write_text("{}")
    (root / "hooks" / "agent-link.sh").write_text(f"#!/bin/sh\n{LAUNCHER_LINE}\necho \"$installed_bin\"\n")
    (root / "__pycache__").mkdir()
    (root / "__pycache__" / "x.pyc").write_bytes(b"\0")
    return root


def test_stage_folder_writes_the_executable_into_the_launcher(tmp_path: Path) -> None:
    source = plugin_source(tmp_path / "src")
    dest = tmp_path / "share" / "agent-link" / "host-plugins" / "h"
    odd = tmp_path / "it's here" / "agent-link"
    host_install.stage_folder(source, dest, odd, {"market/m.json": "{\"name\": \"m\"}"})
    files = sorted(str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file())
    assert files == ["hooks/agent-link.sh", "manifest.json", "market/m.json"]  # no __pycache__
    launcher = dest / "hooks" / "agent-link.sh"
    assert launcher.stat().st_mode & stat.S_IXUSR
    out = subprocess.run(["sh", str(launcher)], capture_output=True, text=True, timeout=30).stdout
    assert out.strip() == str(odd)  # quoted for sh, quote and space included
    assert LAUNCHER_LINE in (source / "hooks" / "agent-link.sh").read_text()  # the source is untouched
    (dest / "stale").write_text("x")
    host_install.stage_folder(source, dest, odd)  # again: replaces what was there
    assert not (dest / "stale").exists() and not (dest / "market").exists()
    assert 0 < host_install.folder_size(dest) < 4096


def test_stage_folder_refuses_a_folder_without_the_launcher_line(tmp_path: Path) -> None:
    source = plugin_source(tmp_path / "src")
    (source / "hooks" / "agent-link.sh").write_text("#!/bin/sh\n")
    with pytest.raises(AgentLinkError) as err:
        host_install.stage_folder(source, tmp_path / "dest", Path("/x"))
    assert err.value.code == "internal_error" and err.value.hint and not (tmp_path / "dest").exists()


def test_remove_folder_removes_empty_parents_up_to_agent_link(tmp_path: Path) -> None:
    folder = host_install.plugin_dir("h", {"XDG_DATA_HOME": str(tmp_path / "data")})
    assert folder == tmp_path / "data" / "agent-link" / "host-plugins" / "h"
    other = folder.parent / "other"
    (folder / "x").mkdir(parents=True)
    other.mkdir()
    host_install.remove_folder(folder)
    assert not folder.exists() and other.exists()  # a sibling keeps the parents
    host_install.remove_folder(other)
    assert not (tmp_path / "data" / "agent-link").exists() and (tmp_path / "data").exists()
    host_install.remove_folder(other)  # nothing there: fine
    assert host_install.plugin_dir("h", {"HOME": str(tmp_path)}) == tmp_path / ".local" / "share" / "agent-link" / "host-plugins" / "h"


def test_run_steps_dry_run_prints_and_does_nothing(tmp_path: Path) -> None:
    done: list[str] = []
    lines: list[str] = []
    steps = [Step("local change", action=lambda: done.append("a")), Step("host command", [sys.executable, "-c", "import sys; sys.exit(3)"])]
    host_install.run_steps(steps, dry_run=True, echo=lines.append)
    assert done == [] and lines[0] == "1. local change" and lines[1].startswith("2. host command\n  $ ")


def test_run_steps_stops_at_a_failure_and_accepts_nothing_to_do(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    fails = Step("remove it", [sys.executable, "-c", "import sys; print('thing not found'); sys.exit(1)"], nothing_to_do=("not found",))
    host_install.run_steps([fails, Step("then this", action=marker.touch)], dry_run=False, echo=lambda _: None)
    assert marker.exists()
    marker.unlink()
    broken = Step("add it", [sys.executable, "-c", "import sys; print('disk full'); sys.exit(2)"])
    with pytest.raises(AgentLinkError) as err:
        host_install.run_steps([broken, Step("never", action=marker.touch)], dry_run=False, echo=lambda _: None)
    assert err.value.code == "upstream_error" and "step 1" in err.value.message and "disk full" in err.value.message
    assert err.value.hint and not marker.exists()
    with pytest.raises(AgentLinkError) as missing:
        host_install.run_steps([Step("run", [str(tmp_path / "no-such-cli")])], dry_run=False, echo=lambda _: None)
    assert missing.value.code == "upstream_error"


def test_host_command_finds_names_or_refuses(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cli = tmp_path / "bin" / "hostcli"
    cli.parent.mkdir()
    cli.write_text("#!/bin/sh\n")
    cli.chmod(0o755)
    assert host_install.host_command("h", "hostcli", None, {"PATH": str(cli.parent)}) == str(cli)
    assert host_install.host_command("h", "hostcli", str(cli), {"PATH": ""}) == str(cli)
    with pytest.raises(AgentLinkError) as err:
        host_install.host_command("h", "hostcli", None, {"PATH": str(tmp_path)})
    assert err.value.code == "h_unavailable" and "--host-bin" in (err.value.hint or "")
    with pytest.raises(AgentLinkError):
        host_install.host_command("h", "hostcli", str(tmp_path / "nope"), {"PATH": ""})
    assert host_install.host_command("h", "hostcli", None, {"PATH": ""}, dry_run=True) == "hostcli"
    # the dry run shows its plan but says the real run would stop there
    assert "`hostcli` is not on PATH. The real run would stop here." in capsys.readouterr().err


def test_the_executable_is_the_one_beside_this_interpreter() -> None:
    exe = host_install.agent_link_executable()
    assert exe == Path(sys.executable).with_name("agent-link").absolute() and os.access(exe, os.X_OK)


def test_the_first_host_plugin_asking_adds_the_groups_the_next_ones_share() -> None:
    cli = click.Group()
    assert "install" not in cli.commands
    host_install.install_group(cli).add_command(click.Command("h", callback=lambda: click.echo("installed h")))
    host_install.install_group(cli).add_command(click.Command("g", callback=lambda: click.echo("installed g")))
    assert CliRunner().invoke(cli, ["install", "h"]).output == "installed h\n"
    assert CliRunner().invoke(cli, ["install", "g"]).output == "installed g\n"
    assert "Register agent-link with a host application" in CliRunner().invoke(cli, ["--help"]).output
    assert host_install.uninstall_group(cli).commands == {}


def test_an_install_command_that_is_not_a_group_is_refused() -> None:
    cli = click.Group()
    cli.add_command(click.Command("install"))
    with pytest.raises(TypeError, match="not a command group"):
        host_install.install_group(cli)


def test_every_host_plugin_carries_the_same_launcher() -> None:
    """Each host plugin's package carries its own copy of the launcher (a wheel must hold
    it); hooks/ links them, and they must not drift apart."""
    root = Path(__file__).resolve().parents[3]
    launchers = sorted((root / "hooks").glob("*/agent-link.sh"))
    assert len(launchers) >= 2, launchers
    assert len({launcher.read_bytes() for launcher in launchers}) == 1, launchers


# what the pinned Codex (0.171.0) prints for a config.toml it cannot parse (two frames left out)
CODEX_TOML_ERROR = """WARNING: proceeding, even though we could not create PATH aliases: Refusing to create helper binaries
Error: failed to load bootstrap configuration

Caused by:
    0: /home/me/.codex/config.toml:3:20: unclosed table, expected `]`
    1: TOML parse error at line 3, column 20
         |
       3 | [plugins."x@y".mcp
         |                    ^
       unclosed table, expected `]`
       

Stack backtrace:
   0: <unknown>
   1: <unknown>
   2: <unknown>
   3: <unknown>
   4: <unknown>
   5: <unknown>
   6: <unknown>
   7: <unknown>
   8: <unknown>
"""
CODEX_HOME_ERROR = """Error: failed to resolve CODEX_HOME

Caused by:
    CODEX_HOME points to "/home/me/nope", but that path does not exist

Stack backtrace:
   0: <unknown>
   1: <unknown>
   2: <unknown>
   3: <unknown>
   4: <unknown>
   5: <unknown>
"""
NODE_ERROR = """Error: settings.json: Unexpected token } in JSON at position 12
    at JSON.parse (<anonymous>)
    at readSettings (file:///cli.js:10:3)
    at async main (file:///cli.js:99:1)
    at async run (file:///cli.js:120:1)
    at async start (file:///cli.js:130:1)
"""
SYMBOL_BACKTRACE = "Error: no\n\nStack backtrace:\n   0: anyhow::error::new\n             at /rustc/x/src/lib.rs:1:2\n   1: main\n"


@pytest.mark.parametrize(("output", "said"), [
    (CODEX_TOML_ERROR, "config.toml:3:20: unclosed table, expected `]`"),
    (CODEX_HOME_ERROR, 'CODEX_HOME points to "/home/me/nope", but that path does not exist'),
    (NODE_ERROR, "Unexpected token } in JSON at position 12"),
    (SYMBOL_BACKTRACE, "Error: no"),
])
def test_a_failed_steps_error_keeps_the_cause_not_the_backtrace(output: str, said: str) -> None:
    """Only the last 5 lines were kept, for Codex ``4: <unknown> ... 8: <unknown>``: the cause
    was lost. Every host's steps keep the error and its cause chain, not the frames."""
    broken = Step("add it", [sys.executable, "-c", f"import sys; sys.stderr.write({output!r}); sys.exit(1)"])
    with pytest.raises(AgentLinkError) as err:
        host_install.run_steps([broken], dry_run=False, echo=lambda _: None)
    assert said in err.value.message, err.value.message
    assert "<unknown>" not in err.value.message and "at readSettings" not in err.value.message
    assert "anyhow" not in err.value.message and "/rustc" not in err.value.message and "Stack backtrace" not in err.value.message
    assert err.value.details["output"].startswith(output.strip()[:40])  # the whole output stays in the details


def test_output_without_an_error_line_keeps_its_last_lines() -> None:
    assert host_install.cause_lines("\n".join(f"line {i}" for i in range(9)) + "\n\n") == [f"line {i}" for i in range(4, 9)]
