"""``bench writers``'s count of the cores the whole machine kept busy over a case."""

from __future__ import annotations

from dynbucket.bench.writers import _busy_between


def test_cores_busy_are_counted_over_the_samples_inside_a_cases_span() -> None:
    # (time, busy CPU seconds so far): 1 core busy until t=2, then 2 cores.
    samples = [(0.0, 0.0), (1.0, 1.0), (2.0, 2.0), (3.0, 4.0), (4.0, 6.0)]
    assert _busy_between(samples, 0.0, 2.0) == 1.0
    assert _busy_between(samples, 2.0, 4.0) == 2.0
    assert _busy_between(samples, 0.5, 3.5) == 1.5  # from t=1 to t=3
    assert _busy_between(samples, 0.5, 1.5) is None  # one sample inside: not told
    assert _busy_between([], 0.0, 9.0) is None
