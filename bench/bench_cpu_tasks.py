"""The ``cpu_bound`` scenario's tasks: the same pure-Python work, in a child process and on
a thread. Imported as ``bench_cpu_tasks`` (``bench/`` is on the PYTHONPATH of the
processes the benchmark starts) by the control plane and the subworker of that scenario
only: a subworker that loads a process task starts its process pool, which the other
scenarios must not pay for.

It must never sleep or wait: the work is a fixed number of rounds of arithmetic, so one
task is the same work whichever pool runs it (the benchmark calibrates the rounds to about
20 ms of CPU on this machine).
"""

from __future__ import annotations

from fastworker import task

_MASK = 0xFFFFFFFF


def spin(rounds: int) -> int:
    """``rounds`` steps of a 32-bit linear congruential generator, all in the interpreter
    (holding the GIL throughout); the final state, so the work cannot be skipped."""
    x = 1
    for _ in range(rounds):
        x = (x * 1103515245 + 12345) & _MASK
    return x


@task(pool="process")
def spin_process(rounds: int) -> int:
    """CPU-bound in a child process of the subworker: one core per child."""
    return spin(rounds)


@task(pool="thread")
def spin_thread(rounds: int) -> int:
    """The same work on a subworker thread: the threads share one GIL."""
    return spin(rounds)
