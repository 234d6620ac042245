"""The soak scenario: the slope it reports is memory growth per minute after the warm-up,
whatever the sampling; and a real control plane and subworker under steady load show none."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.procs import Supervisor
from bench.soak import after_warm_up, measure_soak, slope_per_minute


def test_a_steady_rise_is_its_rate_per_minute() -> None:
    samples = [(float(t), 50.0 + 0.5 * t) for t in range(0, 121)]  # 0.5 MiB/s

    assert slope_per_minute(samples) == pytest.approx(30.0)


def test_a_flat_line_with_noise_has_no_slope() -> None:
    samples = [(float(t), 60.0 + (0.4 if t % 2 else -0.4)) for t in range(0, 300)]

    assert abs(slope_per_minute(samples)) < 0.05


def test_the_warm_up_is_left_out_so_filling_the_caches_is_not_growth() -> None:
    filling = [(float(t), 40.0 + 2.0 * t) for t in range(0, 25)]
    steady = [(float(t), 88.0) for t in range(25, 100)]

    kept = after_warm_up(filling + steady)

    assert kept[0][0] == 25.0  # the first quarter of 0..99 s ends at 24.75 s
    assert slope_per_minute(kept) == pytest.approx(0.0)


def test_too_few_samples_have_no_slope() -> None:
    assert slope_per_minute([]) == 0.0
    assert slope_per_minute([(1.0, 5.0)]) == 0.0
    assert after_warm_up([]) == []


@pytest.mark.integration
@pytest.mark.timeout(180)
async def test_a_control_plane_under_steady_load_stays_flat(tmp_path: Path) -> None:
    """Issue 31's third row, shorter: 45 s at 1,000 tasks/s, half of them with an idempotency
    key, with the result cache full after 2 s. Idempotency keys of evicted results were
    swept every 30 s: under steady load they made the resident memory climb."""
    supervisor = Supervisor(tmp_path)
    try:
        metrics = await measure_soak(supervisor, 45.0, 1_000, timeout=60.0, result_cache=2_000)
    finally:
        supervisor.stop_all()

    print(metrics)
    assert metrics["tasks_per_s"] > 500  # a load, even on a busy machine
    assert metrics["rss_slope_mib_per_min.control_plane"] <= 3.0
    assert metrics["rss_slope_mib_per_min.subworker"] <= 3.0
