"""The process pool's default size: the CPUs a container may really use."""

from __future__ import annotations

from pathlib import Path

from fastworker_subworker.processes import cgroup_cpu_limit, cpu_count


def test_a_cgroup_v2_quota_is_rounded_up_to_whole_cpus(tmp_path: Path) -> None:
    cpu_max = tmp_path / "cpu.max"
    assert cgroup_cpu_limit("150000 100000\n", cpu_max) == 2
    assert cgroup_cpu_limit("100000 100000\n", cpu_max) == 1
    assert cgroup_cpu_limit("5000 100000\n", cpu_max) == 1  # 0.05 CPU still runs one child
    assert cgroup_cpu_limit("max 100000\n", cpu_max) is None


def test_a_cgroup_v1_quota_reads_its_period_beside_it(tmp_path: Path) -> None:
    quota = tmp_path / "cpu.cfs_quota_us"
    (tmp_path / "cpu.cfs_period_us").write_text("100000\n")
    assert cgroup_cpu_limit("250000\n", quota) == 3
    assert cgroup_cpu_limit("-1\n", quota) is None


def test_the_default_is_at_least_one_and_at_most_the_cpus_this_process_may_use() -> None:
    import os

    assert 1 <= cpu_count() <= len(os.sched_getaffinity(0))
