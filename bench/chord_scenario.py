"""The ``chord`` scenario (issue 21): a workflow's fan-out and fan-in, end to end.

One repeat submits ``chord([add(i, i) for i in range(sizes.chord)], total())`` with
``Client.submit_workflow`` (compiled in the client, accepted whole by the control plane,
journaled on ``cp+1sw+journal``), waits for the workflow with ``wait_workflow`` and then
for the callback's result: ``submit_ms`` is the ``submit_workflow`` call alone,
``e2e_s`` runs from before it to the callback's result in hand, ``steps_per_s`` is the
chord's steps (members and callback) over ``e2e_s``. The workflow must succeed with every
step and the callback's sum must be the members' values added up; anything else fails
the scenario, whatever its speed.

It runs on ``cp+1sw`` (a control plane that only dispatches and releases steps, and one
subworker running them) and on ``cp+1sw+journal`` (the same, durable), one after the
other: not side by side, so their difference carries this VM's drift.
"""

from __future__ import annotations

from time import perf_counter

from bench.config import DURABLE
from bench.scenarios import Run, Scenario, WrongResult
from fastworker import TaskStatus, chord, sig
from fastworker_protocol.workflows import WorkflowState

CHORD_UNITS = {"submit_ms": "ms", "e2e_s": "s", "steps_per_s": "steps/s"}
CHORD_TOPOLOGIES = ("cp+1sw", DURABLE)


async def measure_chord(run: Run) -> dict[str, float]:
    n = run.sizes.chord
    item = chord([sig("add", i, i) for i in range(n)], sig("total"))
    start = perf_counter()
    workflow_id = await run.client.submit_workflow(item)
    submitted = perf_counter()
    info = await run.client.wait_workflow(workflow_id, timeout=run.timeout)
    if info.state is not WorkflowState.SUCCESS or len(info.steps) != n + 1:
        raise WrongResult(f"workflow {workflow_id} ended {info.state} with {len(info.steps)} steps")
    callback = await run.client.wait_result(info.steps[-1].task_id, timeout=run.timeout)
    elapsed = perf_counter() - start
    expected = sum(i + i for i in range(n))
    if callback.status != TaskStatus.SUCCESS or callback.result != expected:
        raise WrongResult(
            f"callback {callback.task_id} ended {callback.status} with {callback.result!r} "
            f"(error {callback.error}); expected success with {expected!r}"
        )
    return {
        "submit_ms": (submitted - start) * 1000.0,
        "e2e_s": elapsed,
        "steps_per_s": (n + 1) / elapsed,
    }


CHORD = Scenario(
    "chord", CHORD_UNITS, lambda s: s.chord + 1, measure_chord, topologies=CHORD_TOPOLOGIES
)
