"""The everyday install survives deleting the checkout (README, "Install for everyday use").

Wheels of the core, two plugins and the host kit one of them needs are built from a copy of the sources, the copy is deleted,
and the wheels are installed (with their dependencies, from the package index or pip's cache,
as ``make install`` fetches them) into a fresh virtualenv. That virtualenv's ``agent-link``
then has to work with nothing of the checkout in reach: another working directory, no
``PYTHONPATH``, no checkout ``.venv`` on ``PATH``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from agent_link_testing.mcp_client import exchange_lines

pytestmark = pytest.mark.packaging  # pip builds and installs: the integration step (make test-realhost)

REPO = Path(__file__).resolve().parents[1]
# receipts reads caller context with the host kit, which takes its pid check from presence
PLUGINS = ("roles", "receipts", "hostkit", "presence")
BOUND_S = 240  # pip under load on a shared 2-core machine; the pytest timeout is the outer bound
IGNORE = shutil.ignore_patterns("tests", "*.egg-info", "__pycache__", "build", "dist")


def pip(*args: str, cwd: Path | None = None) -> None:
    """This interpreter's pip, run for the environment ``--python`` names; fails with pip's words."""
    proc = subprocess.run([sys.executable, "-m", "pip", "--disable-pip-version-check", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=BOUND_S)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]


def build_wheels(tmp_path: Path) -> list[Path]:
    """Wheels of the core and :data:`PLUGINS`, built from a copy of their sources that is
    deleted afterwards (one build environment with the setuptools pyproject.toml asks for)."""
    src = tmp_path / "checkout"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, src / name)
    shutil.copytree(REPO / "agent_link_core", src / "agent_link_core", ignore=IGNORE)
    for plugin in PLUGINS:
        shutil.copytree(REPO / "plugins" / plugin, src / "plugins" / plugin, ignore=IGNORE)
    build_env = tmp_path / "build-env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(build_env)], check=True, timeout=BOUND_S)
    pip("--python", str(build_env / "bin" / "python"), "install", "--quiet", "setuptools>=77")
    wheels = tmp_path / "wheels"
    pip("--python", str(build_env / "bin" / "python"), "wheel", "--quiet", "--no-deps", "--no-build-isolation",
        "-w", str(wheels), ".", *(f"./plugins/{p}" for p in PLUGINS), cwd=src)
    shutil.rmtree(src)  # the "checkout" is gone before anything is installed or run
    shutil.rmtree(build_env)
    return sorted(wheels.glob("*.whl"))


def elsewhere_env(venv: Path) -> dict[str, str]:
    """The test's environment (isolated HOME and state dir) with nothing pointing at the
    checkout: no PYTHONPATH, no virtualenv, PATH without the checkout's .venv, plugins
    discovered as installed."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "AGENT_LINK_LOAD_PLUGINS")}
    path = [p for p in env.get("PATH", "").split(os.pathsep) if p and not p.startswith(str(REPO))]
    env["PATH"] = os.pathsep.join([str(venv / "bin"), *path])
    return env


def test_wheels_in_a_fresh_virtualenv_work_without_the_checkout(tmp_path: Path) -> None:
    wheels = build_wheels(tmp_path)
    assert [w.name.split("-")[0] for w in wheels] == ["agent_link_core", "agent_link_hostkit", "agent_link_presence",
                                                          "agent_link_receipts", "agent_link_roles"]
    venv = tmp_path / "tool-venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=BOUND_S)
    pip("--python", str(venv / "bin" / "python"), "install", "--quiet", *map(str, wheels))
    env, cwd = elsewhere_env(venv), tmp_path / "elsewhere"
    cwd.mkdir()
    agent_link = str(venv / "bin" / "agent-link")

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(list(args), cwd=cwd, env=env, capture_output=True, text=True, timeout=BOUND_S)

    where = run(str(venv / "bin" / "python"), "-c", "import sys, agent_link_core, agent_link_roles, agent_link_receipts as r;"
                "print(agent_link_core.__file__, agent_link_roles.__file__, r.__file__); print(*sys.path, sep='\\n')")
    assert where.returncode == 0, where.stderr
    assert str(REPO) not in where.stdout and where.stdout.split()[0].startswith(str(venv)), where.stdout

    version = run(agent_link, "--version")
    assert version.returncode == 0 and "0.1.0" in version.stdout, version.stderr

    health = run(agent_link, "health", "--json")
    assert health.returncode == 0, health.stderr
    report = json.loads(health.stdout)
    assert report["plugins"]["problems"] == [], report["plugins"]
    assert {"roles", "receipts"} <= set(report["sections"]), report["sections"].keys()

    script = b"".join(json.dumps(message).encode() + b"\n" for message in (
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "wheel-test", "version": "0"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
    ))
    answers = {a.get("id"): a for a in exchange_lines([agent_link, "mcp"], script, 2, env=env, cwd=cwd, bound_s=BOUND_S)}
    assert answers[1]["result"]["serverInfo"]["name"]
    tools = {t["name"] for t in answers[2]["result"]["tools"]}
    assert {"message_agent", "read_agent_link_inbox", "set_agent_role", "list_agent_link_receipts"} <= tools, sorted(tools)
