"""The roles section of the people's views (the ``agent-link web`` page): who holds which
role, and a ``role:<name>`` label beside each holder wherever agents are listed."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agent_link_web.panels import Cell, Panel, PanelView
from agent_link_roles.context import from_app
from agent_link_roles.table import load_table

if TYPE_CHECKING:  # pragma: no cover
    from agent_link_core.app import App


def render(app: App) -> PanelView:
    """Every valid role of roles.json with its holder(s) and project assignments."""
    table = load_table(from_app(app).state_dir)
    rows: list[list[Cell]] = []
    labels: dict[str, list[str]] = {}
    for _name, role in sorted(table.roles.items()):
        holders = ", ".join(role.holders) if role.holders else "nobody"
        note = "ambiguous: several holders" if len(role.holders) > 1 else None
        rows.append([role.role_address, holders, role.assigned_at, note])
        if role.address:
            labels.setdefault(role.address, []).append(role.role_address)
        for root, holder in sorted(role.projects.items()):
            rows.append([role.role_address, holder, None, f"for project {root}"])
            labels.setdefault(holder, []).append(f"{role.role_address} ({root})")
    problems = f"{len(table.problems)} entries of roles.json were ignored (agent-link health tells which)." if table.problems else None
    return PanelView(["role", "holder", "assigned", "note"], rows, empty="No roles are assigned.", note=problems,
                     agent_labels=labels)


PANEL = Panel("roles", "Roles", render, order=10)
#: what ``agent_link_register_panels`` registers (named by the entry module, imported when panels are listed)
PANELS = (PANEL,)
