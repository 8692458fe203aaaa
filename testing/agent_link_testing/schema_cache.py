"""Sharing the valid JSON schemas' cache between the ``agent-link`` processes of many tests.

Every ``agent-link`` process that lists the tools checks their schemas against the meta-schema
once and remembers those found valid in ``$XDG_CACHE_HOME/agent-link/valid-schemas/``
(agent_link_core.tools.registry.check_schema). Tests give each test its own
``XDG_CACHE_HOME``; linking that folder to one shared folder lets a test process check each
schema once instead of in every process it starts. Invalid schemas are never remembered, so
what a test sees is what the check says.
"""

from __future__ import annotations

from pathlib import Path


def share_valid_schemas(cache_home: Path, shared: Path) -> None:
    """Make ``cache_home/agent-link/valid-schemas`` a link to ``shared`` (both created when
    missing), for the processes run with ``XDG_CACHE_HOME=cache_home``.

    :raises FileExistsError: ``cache_home`` already has a ``valid-schemas`` folder.
    """
    shared.mkdir(parents=True, exist_ok=True)
    folder = cache_home / "agent-link"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "valid-schemas").symlink_to(shared, target_is_directory=True)
