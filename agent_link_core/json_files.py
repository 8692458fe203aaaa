"""Reading small JSON files that must hold one object (records, registries, caches).

Many files agent-link reads are advisory or written by other programs (a host's session
records, a registry another process keeps): a missing, half-written or foreign file is not an
error there, it is "no record". :func:`read_json_object` is that rule in one place.

Imports only the standard library: the hook fast path uses it.
"""

from __future__ import annotations

import json

TYPE_CHECKING = False  # typing stays out of the hook fast path
if TYPE_CHECKING:
    import os
    from typing import Any


def read_json_object(path: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The JSON object in the UTF-8 file ``path``, or None when there is none.

    None for: a missing file, one that cannot be opened or read (permissions, a directory in its
    place), text that is not UTF-8 or not JSON, JSON nested too deeply for the parser, and any
    JSON value that is not an object (a list, a string, ``null``...). An empty object is
    returned as ``{}``. Never raises for the file's content or absence; the caller decides
    what "no record" means.
    """
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError, RecursionError):  # ValueError: not UTF-8 / not JSON; RecursionError: nested too deeply
        return None
    return data if isinstance(data, dict) else None
