"""The ``startup`` scenario: how long the ``fastworker`` command takes to print its help.

``fastworker --help`` and ``fastworker status --help``, each started as a user starts it
(the console script, a fresh interpreter every time), so the figure is the interpreter's
start plus what the command imports before it prints (issue 32 asks for at most 0.3 s).
Nothing else runs meanwhile; the median of the runs is kept, as one noisy start on a busy
machine says little.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

STARTUP_UNITS = {"help_ms": "ms", "status_help_ms": "ms"}
COMMANDS = {"help_ms": ("--help",), "status_help_ms": ("status", "--help")}


def measure_startup(runs: int) -> dict[str, float]:
    """The median wall time, in ms, of ``runs`` starts of each command."""
    script = Path(sys.executable).with_name("fastworker")
    return {key: _median_ms(script, argv, runs) for key, argv in COMMANDS.items()}


def _median_ms(script: Path, argv: tuple[str, ...], runs: int) -> float:
    took = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run([script, *argv], stdout=subprocess.DEVNULL, check=True, timeout=60)
        took.append(time.perf_counter() - start)
    return 1000 * statistics.median(took)
