"""Fixtures: a real NATS server per test and "machines" on it (agent_link_machines.testkit)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from agent_link_machines.testkit import Engine, Machine


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    server = Engine(tmp_path / "engine")
    server.start()
    try:
        yield server
    finally:
        server.kill()


@pytest.fixture
def machines(tmp_path: Path, engine: Engine) -> Iterator[Callable[[str], Machine]]:
    made: list[Machine] = []

    def make(name: str, root_name: str | None = None) -> Machine:
        m = Machine(tmp_path / (root_name or f"machine-{name}"), name, engine)
        made.append(m)
        return m

    try:
        yield make
    finally:
        for m in made:
            m.stop()
