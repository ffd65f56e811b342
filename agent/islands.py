"""Islands: several conversations with the model at once, each growing its own population, with the
best kernels migrating between them now and then (pure logic; the LLM policy runs the turns).

One conversation converges on its first good idea. Several, each shown only its own elites, keep
different lines of work alive; every ``MIGRATION_EVERY`` generations each island is also shown the
fastest elite of the others, so a good idea spreads without taking over at once. Islands run their
turns in parallel threads: one writes or waits for the model while another's candidate is judged.
"""

from __future__ import annotations

from typing import Any

MIGRATION_EVERY = 2
"""Generations between migrations: at generations 2, 4, ... each island sees the others' best."""


def island_of(memberships: dict[str, int], cid: str) -> int:
    """The island a candidate was written on (0 for candidates from before islands, or adopted)."""
    return int(memberships.get(cid, 0))


def elites_for(island: int, elites: list[dict[str, Any]], memberships: dict[str, int],
               generation: int) -> list[dict[str, Any]]:
    """What ``island`` is shown: its own elites, fastest first; at a migration generation, also the
    fastest elite of the other islands (marked with ``migrant_from``)."""
    ordered = sorted(elites, key=lambda e: e["runtime_ms"] or float("inf"))
    own = [e for e in ordered if island_of(memberships, e["id"]) == island]
    if generation > 0 and generation % MIGRATION_EVERY == 0:
        others = [e for e in ordered if island_of(memberships, e["id"]) != island]
        if others:
            migrant = {**others[0], "migrant_from": island_of(memberships, others[0]["id"])}
            own = sorted([*own, migrant], key=lambda e: e["runtime_ms"] or float("inf"))
    return own


def share(count: int, islands: int) -> list[int]:
    """Split ``count`` candidates over ``islands`` (each at least one)."""
    base, extra = divmod(max(count, islands), islands)
    return [base + (1 if k < extra else 0) for k in range(islands)]
