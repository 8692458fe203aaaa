"""Install a plugin distribution into a folder the way pip would, for tests of plugin discovery.

A test that puts the folder on ``PYTHONPATH`` of a subprocess gets a real ``agent_link`` entry
point, found by :mod:`importlib.metadata` exactly as an installed plugin is; deleting the
returned ``dist-info`` folder uninstalls it (the package files may stay, as after a careless
uninstall). :func:`repo_plugin_names` names the plugins this repository ships, the only ones its
plugin suites load (the root conftest.py).
"""

from __future__ import annotations

import textwrap
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def repo_plugin_names(repo: Path = REPO) -> tuple[str, ...]:
    """The ``agent_link`` entry point names that ``plugins/*/pyproject.toml`` and
    ``examples/*/pyproject.toml`` declare, sorted."""
    names: set[str] = set()
    for pyproject in [*repo.glob("plugins/*/pyproject.toml"), *repo.glob("examples/*/pyproject.toml")]:
        with pyproject.open("rb") as f:
            names.update(tomllib.load(f).get("project", {}).get("entry-points", {}).get("agent_link", {}))
    return tuple(sorted(names))


def install_dist(site: Path, package: str, files: dict[str, str], *, entry_name: str, entry_module: str) -> Path:
    """Write ``site/<package>/<file>`` for each of ``files`` and a ``dist-info`` declaring
    ``<entry_name> = <entry_module>`` in the ``agent_link`` group.

    :param site: the folder to install into (created when missing).
    :param package: the import package name (its distribution name is the same with ``-``).
    :param files: file name inside the package → source text (dedented); ``__init__.py`` is
        added empty when not given.
    :returns: the ``dist-info`` folder.
    """
    pkg = site / package
    pkg.mkdir(parents=True)
    files = {"__init__.py": "", **files}
    for name, text in files.items():
        (pkg / name).write_text(textwrap.dedent(text))
    dist = site / f"{package}-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {package.replace('_', '-')}\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(f"[agent_link]\n{entry_name} = {entry_module}\n")
    return dist


def agent_link_elsewhere(dest: Path) -> Path:
    """An ``agent-link`` entry point outside the checkout: a fresh virtualenv at ``dest`` whose
    interpreter reads the packages of the interpreter running the tests (a ``.pth`` line adds
    its site-packages), with the console script pip would write. Returns ``dest/bin/agent-link``.

    It stands in for a pipx / ``uv tool`` install: the executable, its interpreter and its
    folder are not the checkout's ``.venv``; the package code is still the checkout's.
    """
    import subprocess
    import sys
    import sysconfig

    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(dest)], check=True, timeout=120)
    python = dest / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                             capture_output=True, text=True, check=True, timeout=60).stdout.strip()
    ours = sysconfig.get_path("purelib")  # addsitedir also runs its .pth files (the editable installs)
    Path(purelib, "agent_link_tests_elsewhere.pth").write_text(f"import site; site.addsitedir({ours!r})\n")
    script = dest / "bin" / "agent-link"
    # what pip writes for pyproject.toml's [project.scripts] entry
    script.write_text(f"#!{python}\nimport sys\nfrom agent_link_core.entry import main\nsys.exit(main())\n")
    script.chmod(0o755)
    return script
