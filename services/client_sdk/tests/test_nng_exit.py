"""A process exits cleanly with pynng objects left in reference cycles.

Before, a pynng aio that only the final garbage collection could free was freed after
pynng's ``nng_fini``: the process hung (or aborted, as the ``helm test`` pod's
``fastworker submit`` over TLS did, with exit code 134).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

LEFT_IN_A_CYCLE = textwrap.dedent(
    """
    import asyncio
    import pynng
    from pynng import _aio
    {imports}

    async def main():
        socket = pynng.Req0()
        cycle = [_aio.AIOHelper(socket, "asyncio")]
        cycle.append(cycle)

    asyncio.run(main())
    print("done", flush=True)
    """
)


def exit_of(imports: str, timeout: float) -> subprocess.CompletedProcess[str] | None:
    """How the script ended, or ``None`` if it was still running after ``timeout``."""
    script = LEFT_IN_A_CYCLE.format(imports=imports)
    try:
        return subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        return None


def test_a_process_using_fastworker_exits_with_pynng_objects_left_in_a_cycle() -> None:
    done = exit_of("from fastworker import Client", timeout=30)
    assert done is not None, "the process hung at exit"
    assert (done.returncode, done.stdout.strip()) == (0, "done"), done.stderr


def test_without_it_the_same_process_does_not_exit_cleanly() -> None:
    # The failure this guards against, shown on pynng alone: it hangs or aborts.
    done = exit_of("", timeout=5)
    assert done is None or done.returncode != 0
