"""The processes fix glibc's mmap threshold, unless the operator set it."""

from __future__ import annotations

import subprocess
import sys

import pytest

PROBE = "from fastworker_common.allocator import return_large_blocks_to_the_system as r; print(r())"


def _probe(env: dict[str, str]) -> str:
    done = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, env=env, check=True
    )
    return done.stdout.strip()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_the_threshold_is_fixed_on_glibc() -> None:
    assert _probe({}) == "True"


def test_a_threshold_the_operator_set_is_left_alone() -> None:
    assert _probe({"MALLOC_MMAP_THRESHOLD_": "131072"}) == "False"
