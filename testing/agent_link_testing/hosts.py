"""Which real host CLIs the real-host tests run, and the Node.js they run with.

``make install`` installs three npm folders (see ``hosts/install.sh``):

* ``hosts/`` -- the current pins (the newest releases when they were last checked);
* ``hosts/previous/`` -- the previous pins, kept passing in a second real-host run;
* ``hosts/node/`` -- Node.js >= 22 from the npm registry's ``node`` package. Claude Code 2.1.332
  declares ``engines: node >= 22`` (its npm postinstall runs with Node; the CLI itself is a
  native binary), and machines often carry an older Node, so the host folders are installed and
  the host CLIs started with this one first on ``PATH``.

``AGENT_LINK_HOSTS_DIR`` (absolute, or relative to the repository) selects another host folder
for a whole test run: ``hosts/previous`` for the previous pins, or the scratch folder of
``make test-latest``. Every real-host launcher (:mod:`agent_link_testing.claude_host`,
:mod:`agent_link_testing.codex_host`, :mod:`agent_link_testing.opencode_host`) asks
:func:`hosts_dir`, and tests that depend on what a
host release can do ask :func:`host_version` instead of naming a version.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, MutableMapping
from pathlib import Path

__all__ = [
    "CLAUDE_PACKAGE",
    "CODEX_PACKAGE",
    "OPENCODE_PACKAGE",
    "REPO_ROOT",
    "HostsMissing",
    "claude_version",
    "codex_version",
    "host_version",
    "hosts_dir",
    "node_binary",
    "opencode_version",
    "version_at_least",
    "with_host_node",
]

REPO_ROOT = Path(__file__).resolve().parents[2]
CLAUDE_PACKAGE = "@anthropic-ai/claude-code"
CODEX_PACKAGE = "@openai/codex"
OPENCODE_PACKAGE = "opencode-ai"
NODE_DIR = REPO_ROOT / "hosts" / "node"
NODE_MIN_MAJOR = 22


class HostsMissing(RuntimeError):
    """A host folder, its lock file or the registry Node is missing: run ``make hosts``."""


def hosts_dir(env: Mapping[str, str] | None = None) -> Path:
    """The host folder of this test run: ``AGENT_LINK_HOSTS_DIR`` or ``<repo>/hosts``."""
    raw = (os.environ if env is None else env).get("AGENT_LINK_HOSTS_DIR", "").strip()
    if not raw:
        return REPO_ROOT / "hosts"
    path = Path(raw)
    return path if path.is_absolute() else REPO_ROOT / path


def host_version(package: str, root: Path | None = None) -> str:
    """The version of ``package`` (an npm name) that ``root``'s ``package-lock.json`` pins.

    :raises HostsMissing: no lock file, or the package is not in it.
    """
    root = hosts_dir() if root is None else root
    try:
        lock = json.loads((root / "package-lock.json").read_text())
        return str(lock["packages"][f"node_modules/{package}"]["version"])
    except (OSError, ValueError, KeyError) as exc:
        raise HostsMissing(f"{package} is not pinned in {root / 'package-lock.json'} ({exc!r}); run `make hosts`") from None


def claude_version(root: Path | None = None) -> str:
    """The Claude Code version of the host folder (e.g. ``"2.1.332"``)."""
    return host_version(CLAUDE_PACKAGE, root)


def codex_version(root: Path | None = None) -> str:
    """The Codex CLI version of the host folder (e.g. ``"0.171.0"``)."""
    return host_version(CODEX_PACKAGE, root)


def opencode_version(root: Path | None = None) -> str:
    """The opencode version (npm ``opencode-ai``) of the host folder (e.g. ``"1.18.33"``)."""
    return host_version(OPENCODE_PACKAGE, root)


def version_at_least(version: str, minimum: str) -> bool:
    """``"2.1.332" >= "2.1.224"`` by numeric parts (pre-release suffixes ignored)."""

    def parts(v: str) -> tuple[int, ...]:
        return tuple(int("".join(ch for ch in p if ch.isdigit()) or 0) for p in v.split("-", 1)[0].split("."))

    return parts(version) >= parts(minimum)


def node_binary() -> Path:
    """The registry Node (>= 22) that ``make hosts`` installed under ``hosts/node``.

    :raises HostsMissing: not installed.
    """
    binary = NODE_DIR / "node_modules" / "node" / "bin" / "node"
    if not (binary.is_file() and os.access(binary, os.X_OK)):
        raise HostsMissing(f"no Node.js at {binary}; run `make hosts` (it installs Node >= {NODE_MIN_MAJOR} from the npm registry)")
    return binary


def with_host_node(env: MutableMapping[str, str]) -> MutableMapping[str, str]:
    """Put the registry Node's directory first on ``env["PATH"]`` (in place; returns ``env``),
    so a host CLI and everything it starts with ``node`` get Node >= 22."""
    bin_dir = str(node_binary().parent)
    rest = [p for p in env.get("PATH", os.defpath).split(os.pathsep) if p and p != bin_dir]
    env["PATH"] = os.pathsep.join([bin_dir, *rest])
    return env
