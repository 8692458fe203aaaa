"""``agent-link install codex`` / ``agent-link uninstall codex`` against the REAL pinned Codex.

In a temporary HOME and CODEX_HOME, with an ``agent-link`` entry point outside the checkout
(:func:`agent_link_testing.dists.agent_link_elsewhere`) and the checkout's ``.venv/bin`` off
PATH:

* ``--dry-run`` prints the steps and changes nothing;
* install registers the small plugin folder: it and Codex's cached copy are under 1 MB, the
  launcher names the entry point it was installed with, and a ``codex exec`` whose model calls
  ``agent_link_health`` through the installed plugin gets its result;
* uninstall removes the plugin, the marketplace, Codex's cache and agent-link's folder; Codex
  still runs a turn afterwards, and a second uninstall is fine.

A missing host binary fails these tests ("run `make hosts`"); they never skip.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from agent_link_testing.codex_host import STUB_KEY_ENV, codex_binary, write_codex_config
from agent_link_testing.dists import agent_link_elsewhere
from agent_link_testing.responses_stub import ResponsesStub, mcp_tool_call, text

from agent_link_hostkit.host_install import folder_size, plugin_dir

pytestmark = [pytest.mark.realhost, pytest.mark.timeout(900)]

BOUND_S = 300  # a bound per command, never a speed assertion
MB = 1024 * 1024


def run(argv: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=BOUND_S, check=False)
    assert done.returncode == 0, (argv, done.stdout[-2000:], done.stderr[-4000:])
    return done


def test_install_and_uninstall_through_the_command(tmp_path: Path) -> None:
    agent_link = agent_link_elsewhere(tmp_path / "elsewhere")
    codex = str(codex_binary())
    home = tmp_path / "home"
    venv_bin = str(Path(sys.executable).parent)
    path = os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if Path(p).resolve() != Path(venv_bin).resolve())
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CODEX_", "AGENT_LINK_", "CLAUDE_", "XDG_"))}
    env.update(HOME=str(home), CODEX_HOME=str(home / ".codex"), PATH=path, AGENT_LINK_STATE_DIR=str(tmp_path / "state"),
               **{STUB_KEY_ENV: "stub-key"})
    folder = plugin_dir("codex", env)
    cache = home / ".codex" / "plugins" / "cache" / "agent-link"
    with ResponsesStub(default=text("ok")) as stub:
        write_codex_config(home / ".codex", stub.base_url)
        config_before = (home / ".codex" / "config.toml").read_text()

        dry = run([str(agent_link), "install", "codex", "--dry-run", "--host-bin", codex], env, tmp_path)
        assert "plugin marketplace add" in dry.stdout and "dry run" in dry.stdout
        assert not folder.exists() and (home / ".codex" / "config.toml").read_text() == config_before

        run([str(agent_link), "install", "codex", "--host-bin", codex], env, tmp_path)
        assert 0 < folder_size(folder) < MB
        [copy] = (cache / "codex-agent-link").iterdir()
        assert 0 < folder_size(copy) < MB and not (copy / ".venv").exists()
        assert f"installed_bin={agent_link}" in (copy / "hooks" / "agent-link.sh").read_text()

        stub.enqueue(mcp_tool_call("codex_agent_link", "agent_link_health", {}), text("done"))
        run([codex, "exec", "--skip-git-repo-check", "health please"], env, tmp_path)
        outputs = [t for r in stub.responses_requests() for t in r.function_call_output_texts()]
        assert any('{"ok":true,"version"' in t for t in outputs), outputs
        assert (tmp_path / "state" / "agent-link.db").exists()

        run([str(agent_link), "uninstall", "codex", "--host-bin", codex], env, tmp_path)
        assert not cache.exists() and not (home / ".local" / "share" / "agent-link").exists()
        assert "agent-link" not in (home / ".codex" / "config.toml").read_text()
        seen = len(stub.responses_requests())
        run([codex, "exec", "--skip-git-repo-check", "still there?"], env, tmp_path)  # Codex still starts
        later = stub.responses_requests()[seen:]
        assert later and not any(n.endswith("list_agents") for r in later for n in r.tool_names())
        run([str(agent_link), "uninstall", "codex", "--host-bin", codex], env, tmp_path)  # twice is fine


USER_TABLE = ('\n# approve agent-link tools (added by me)\n'
              '[plugins."codex-agent-link@agent-link".mcp_servers.codex-agent-link]\n'
              'default_tools_approval_mode = "approve"\n')


def test_reinstall_keeps_the_persons_own_tables_for_the_plugin(tmp_path: Path) -> None:
    """Install again (the README's step after an upgrade) leaves config.toml byte for byte,
    the table approving agent-link's tools (what install's own hint says to add) and its
    comment included: before, install ran ``codex plugin remove`` first, which deleted both.
    With the marketplace registered from another folder (a checkout's, an older install's),
    install re-registers it and the table still stays; the plugin's tools still answer."""
    agent_link = agent_link_elsewhere(tmp_path / "elsewhere")
    codex = str(codex_binary())
    home = tmp_path / "home"
    venv_bin = str(Path(sys.executable).parent)
    path = os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if Path(p).resolve() != Path(venv_bin).resolve())
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CODEX_", "AGENT_LINK_", "CLAUDE_", "XDG_"))}
    env.update(HOME=str(home), CODEX_HOME=str(home / ".codex"), PATH=path, AGENT_LINK_STATE_DIR=str(tmp_path / "state"),
               **{STUB_KEY_ENV: "stub-key"})
    config = home / ".codex" / "config.toml"
    with ResponsesStub(default=text("ok")) as stub:
        write_codex_config(home / ".codex", stub.base_url)
        run([str(agent_link), "install", "codex", "--host-bin", codex], env, tmp_path)
        with config.open("a") as f:
            f.write(USER_TABLE + "# a comment of mine at the end\n")
        before = config.read_bytes()
        run([str(agent_link), "install", "codex", "--host-bin", codex], env, tmp_path)
        assert config.read_bytes() == before

        # the marketplace registered from another folder, as a checkout's install did
        other = tmp_path / "checkout-marketplace"
        shutil.copytree(plugin_dir("codex", env), other)
        run([codex, "plugin", "marketplace", "remove", "agent-link"], env, tmp_path)
        run([codex, "plugin", "marketplace", "add", str(other)], env, tmp_path)
        assert str(other) in config.read_text()
        run([str(agent_link), "install", "codex", "--host-bin", codex], env, tmp_path)
        after = config.read_text()
        assert USER_TABLE in after and str(other) not in after and str(plugin_dir("codex", env)) in after

        # the reinstalled plugin's tools answer
        stub.enqueue(mcp_tool_call("codex_agent_link", "agent_link_health", {}), text("done"))
        run([codex, "exec", "--skip-git-repo-check", "health please"], env, tmp_path)
        outputs = [t for r in stub.responses_requests() for t in r.function_call_output_texts()]
        assert any('{"ok":true,"version"' in t for t in outputs), outputs


ORIGINALS = '\n# the original Agent Link\n[mcp_servers.codex-agent-link]\ncommand = "/usr/bin/true"\nargs = []\n'


def test_install_says_when_the_original_agent_links_server_shadows_the_plugin(tmp_path: Path) -> None:
    """Coming from the original Agent Link: its ``[mcp_servers.codex-agent-link]`` in config.toml
    shadows the plugin's server of the same name (the pinned Codex runs it; ``codex exec`` gets
    no agent-link tools). Install said "Done"; now it exits 1 naming the file, the table and the
    fix, and once the table is gone the next thread has agent-link's tools."""
    agent_link = agent_link_elsewhere(tmp_path / "elsewhere")
    codex = str(codex_binary())
    home = tmp_path / "home"
    venv_bin = str(Path(sys.executable).parent)
    path = os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if Path(p).resolve() != Path(venv_bin).resolve())
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CODEX_", "AGENT_LINK_", "CLAUDE_", "XDG_"))}
    env.update(HOME=str(home), CODEX_HOME=str(home / ".codex"), PATH=path, AGENT_LINK_STATE_DIR=str(tmp_path / "state"),
               **{STUB_KEY_ENV: "stub-key"})
    with ResponsesStub(default=text("answered")) as stub:
        config = write_codex_config(home / ".codex", stub.base_url)
        mine = config.read_text()
        config.write_text(mine + ORIGINALS)
        done = subprocess.run([str(agent_link), "install", "codex", "--host-bin", codex], env=env, cwd=tmp_path,
                              capture_output=True, text=True, timeout=BOUND_S, check=False)
        assert done.returncode == 1 and "Done." not in done.stdout, (done.stdout[-2000:], done.stderr[-2000:])
        assert f"{config} has a [mcp_servers.codex-agent-link] table of its own" in done.stderr, done.stderr
        assert "agent-link import-legacy" in done.stderr and "Traceback" not in done.stderr

        def tool_names() -> list[str]:
            seen = len(stub.responses_requests())
            run([codex, "exec", "--skip-git-repo-check", "hi"], env, tmp_path)
            return stub.responses_requests()[seen].tool_names()

        assert not any(n.endswith("list_agents") for n in tool_names())  # what the person saw: no tools
        config.write_text(config.read_text().replace(ORIGINALS, "\n"))
        assert any(n.endswith("list_agents") for n in tool_names())


def test_a_failing_codex_step_says_codexs_cause(tmp_path: Path) -> None:
    """A config.toml the pinned Codex cannot parse, and a CODEX_HOME that does not exist: install
    and uninstall fail in one line that keeps Codex's cause (before, the last 5 lines of its
    output were kept: Rust backtrace frames, ``4: <unknown> ... 8: <unknown>``)."""
    agent_link = agent_link_elsewhere(tmp_path / "elsewhere")
    codex = str(codex_binary())
    home = tmp_path / "home"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CODEX_", "AGENT_LINK_", "CLAUDE_", "XDG_"))}
    env.update(HOME=str(home), CODEX_HOME=str(home / ".codex"), AGENT_LINK_STATE_DIR=str(tmp_path / "state"))
    (home / ".codex").mkdir(parents=True)
    (home / ".codex" / "config.toml").write_text('model = "x"\n[plugins."codex-agent-link@agent-link".mcp\nenabled = true\n')
    for verb, extra, cause in (("install", {}, "config.toml:2:43: unclosed table, expected `]`"),
                               ("uninstall", {}, "config.toml:2:43: unclosed table, expected `]`"),
                               ("install", {"CODEX_HOME": str(tmp_path / "nope")}, "but that path does not exist")):
        done = subprocess.run([str(agent_link), verb, "codex", "--host-bin", codex], env={**env, **extra}, cwd=tmp_path,
                              capture_output=True, text=True, timeout=BOUND_S, check=False)
        assert done.returncode == 1 and done.stderr.count("\n") == 1, done.stderr
        assert cause in done.stderr and "<unknown>" not in done.stderr and "Traceback" not in done.stderr, done.stderr
