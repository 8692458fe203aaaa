"""Install a plugin distribution into a folder the way pip would, for tests of plugin discovery.

A test that puts the folder on ``PYTHONPATH`` of a subprocess gets a real ``agent_link`` entry
point, found by :mod:`importlib.metadata` exactly as an installed plugin is; deleting the
returned ``dist-info`` folder uninstalls it (the package files may stay, as after a careless
uninstall).
"""

from __future__ import annotations

import textwrap
from pathlib import Path


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
