"""The hooks the leases plugin specifies (``agent_link_leases.hookspecs``): a claim's awaitable is awaited and its
refusal raised; any other failure is the implementing plugin's, answered as "no plugin claims files"; without the
plugin the hooks do not exist and a call answers ``[]``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agent_link_core import hookimpl
from agent_link_core.app import App
from agent_link_core.errors import AgentLinkError


async def claim(app: App, holder: str, paths: list[str], project_root: str, until_resolved: str | None = None,
                key: str | None = None) -> Any:
    return await app.hooks.acall("agent_link_claim_paths", holder=holder, paths=paths, project_root=project_root, reason=None,
                                 ttl_ms=None, until_resolved=until_resolved, key=key)


def release(app: App, key: str) -> Any:
    return app.hooks.call("agent_link_release_claims", key=key)


class Claims:
    """Keeps file claims as the leases plugin does, specifying its hooks: refuses anything under ``held/``."""

    AGENT_LINK_HOOKSPECS = {"agent_link_leases.hookspecs": ("agent_link_claim_paths", "agent_link_release_claims")}

    def __init__(self) -> None:
        self.claimed: list[tuple[str, list[str], str | None, str | None, bool]] = []

    @hookimpl
    def agent_link_claim_paths(self, holder: str, paths: list[str], project_root: str, reason: str | None, ttl_ms: int | None,
                               until_resolved: str | None, key: str | None, app: App) -> Any:
        async def run() -> dict[str, Any]:
            if "crash.py" in paths:
                raise RuntimeError("a failing claims plugin must not fail its caller")
            if any(p.startswith("held/") for p in paths):
                raise AgentLinkError("lease_conflict", "held", {"conflicts": [{"holder": "fake:two"}]})
            self.claimed.append((holder, paths, until_resolved, key, app is not None))
            return {"projectRoot": project_root, "leases": [{"holder": holder, "path": p} for p in paths]}

        return run()

    @hookimpl
    def agent_link_release_claims(self, key: str, app: App) -> dict[str, Any]:
        if key == "crash":
            raise RuntimeError("a failing release must not fail its caller")
        ended = [c for c in self.claimed if c[3] == key]
        self.claimed = [c for c in self.claimed if c[3] != key]
        return {"released": [{"holder": c[0], "path": p} for c in ended for p in c[1]]}


@pytest.mark.anyio
async def test_claim_paths_hook_is_awaited_and_its_refusal_raised(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("AGENT_LINK_DISABLE_PLUGINS", "codex claude roles receipts leases")
    claims = Claims()
    nobody = App.create()
    keeper = App.create(extra_plugins=(("claims", claims),))
    try:
        # without a plugin specifying them the hooks do not exist: a call answers [], which callers take as "nobody claims"
        assert await claim(nobody, holder="fake:one", paths=["a.py"], project_root=str(tmp_path)) == []
        assert release(nobody, "K1") == []
        got = await claim(keeper, holder="fake:one", paths=["a.py"], project_root=str(tmp_path), until_resolved="M1", key="K1")
        assert got["leases"] == [{"holder": "fake:one", "path": "a.py"}]
        assert claims.claimed == [("fake:one", ["a.py"], "M1", "K1", True)]
        with pytest.raises(AgentLinkError) as refused:
            await claim(keeper, holder="fake:one", paths=["held/b.py"], project_root=str(tmp_path))
        assert refused.value.code == "lease_conflict"
        # any other failure is the plugin's: reported, answered as "no plugin claims files"
        assert await claim(keeper, holder="fake:one", paths=["crash.py"], project_root=str(tmp_path)) is None
        assert any(p.get("plugin") == "claims" and "failing claims plugin" in json.dumps(p) for p in keeper.hooks.boundary.report())
        assert release(keeper, "K1") == {"released": [{"holder": "fake:one", "path": "a.py"}]}
        assert release(keeper, "K1") == {"released": []} and claims.claimed == []
        assert release(keeper, "crash") is None
        assert any("failing release" in json.dumps(p) for p in keeper.hooks.boundary.report())
    finally:
        nobody.close()
        keeper.close()
