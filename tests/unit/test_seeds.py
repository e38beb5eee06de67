"""A sampled family runs a seed's share of its cases, different cases under different
seeds, and every case when told."""

from __future__ import annotations

import pytest

from tests import seeds


def test_a_family_keeps_its_share_in_order_and_seeds_vary_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # As a run samples (`make test-long` runs every case: DYNBUCKET_SAMPLE=all).
    monkeypatch.setattr(seeds, "EVERY_CASE", False)
    cases = list(range(12))
    chosen = set()
    for base in range(40):
        monkeypatch.setattr(seeds, "BASE", base)
        kept = seeds.sample("tests.x::test_y", cases, 3)
        assert len(kept) == 3 and kept == sorted(kept)
        assert seeds.sample("tests.x::test_y", cases, 3) == kept  # a seed repeats its run
        chosen |= set(kept)
    assert chosen == set(cases)  # over runs, every case is met
    monkeypatch.setattr(seeds, "BASE", 7)
    families = {tuple(seeds.sample(f"tests.x::test_{n}", cases, 3)) for n in range(8)}
    assert len(families) > 1  # two families of one run vary apart
    assert seeds.sample("tests.x::test_y", cases, 20) == cases
    monkeypatch.setattr(seeds, "EVERY_CASE", True)
    assert seeds.sample("tests.x::test_y", cases, 3) == cases
