"""A workflow is one trace, exported over real OTLP/HTTP (issue 21, Observability).

The client runs as its own process (configured by the ``OTEL_*`` variables, as any
application would be) and submits a chain; the control plane and a subworker export too.
``OtlpReceiver`` decodes the real protobuf, so the links are checked span by span:
``workflow`` -> each step's ``dispatch`` -> its ``process``.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest
from harness import Cluster
from otlp_receiver import OtlpReceiver, ReceivedSpan
from test_tracing import only, otel_env, start_traced_cluster

pytestmark = pytest.mark.timeout(120)

SUBMIT_CHAIN = """
import sys
from fastworker import SyncClient
from fastworker.tracing import configure_tracing
from it_tasks import add

provider = configure_tracing("workflow-client")
assert provider is not None, "the OTEL_* variables should turn tracing on"
with SyncClient(sys.argv[1], timeout=20, connect_timeout=20) as client:
    workflow_id = client.submit_workflow(add.s(1, 2) | add.s(3) | add.s(4), link=add.s(5))
    info = client.wait_workflow(workflow_id, timeout=30)
    assert info.state == "success", info
provider.shutdown()
print(workflow_id)
"""


@pytest.fixture
def receiver() -> Iterator[OtlpReceiver]:
    with OtlpReceiver() as r:
        yield r


def submit_chain(cluster: Cluster, env: dict[str, str]) -> str:
    done = subprocess.run(
        [sys.executable, "-c", SUBMIT_CHAIN, cluster.discovery],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def descends_from(span: ReceivedSpan, ancestor: ReceivedSpan, spans: list[ReceivedSpan]) -> bool:
    by_id = {s.span_id: s for s in spans}
    parent = span.parent_span_id
    while parent is not None:
        if parent == ancestor.span_id:
            return True
        parent = by_id[parent].parent_span_id if parent in by_id else None
    return False


async def test_a_chain_of_three_is_one_trace_whose_steps_descend_from_the_workflow_span(
    cluster: Cluster, receiver: OtlpReceiver
) -> None:
    # Given a traced control plane and subworker
    env = otel_env(cluster, receiver)
    await start_traced_cluster(cluster, env)

    # When a traced client submits a chain of three (with a link) and waits for it
    workflow_id = submit_chain(cluster, env)
    step_ids = [f"{workflow_id}.{i}" for i in range(3)]

    def processed(spans: list[ReceivedSpan]) -> bool:
        done = {s.attributes.get("messaging.message.id") for s in spans if s.kind == "CONSUMER"}
        return done >= set(step_ids) and any(s.name == "workflow" for s in spans)

    spans = await receiver.wait_for_async(processed, 15, "the workflow's spans")

    # Then one "workflow" span from the client is the root of the steps' trace
    workflow = only(spans, "workflow")
    assert (workflow.service, workflow.kind) == ("workflow-client", "PRODUCER")
    assert workflow.parent_span_id is None
    assert workflow.attributes["fastworker.workflow.id"] == workflow_id
    assert workflow.attributes["fastworker.workflow.steps"] == 3
    assert not [s for s in spans if s.name.startswith("send ")]  # no span per step's send
    # And every step's dispatch and process span is in its trace, below it
    for step_id in step_ids:
        mine = [s for s in spans if s.attributes.get("messaging.message.id") == step_id]
        dispatch, process = only(mine, "dispatch it_tasks.add"), only(mine, "process it_tasks.add")
        assert {s.trace_id for s in mine} == {workflow.trace_id}
        assert dispatch.parent_span_id == workflow.span_id
        assert process.parent_span_id == dispatch.span_id
        assert descends_from(process, workflow, spans)
    # And so does the link task queued once the workflow succeeded
    linked = await receiver.wait_for_async(
        lambda spans: any(
            s.name == "process it_tasks.add"
            and s.attributes.get("messaging.message.id") not in step_ids
            for s in spans
        ),
        15,
        "the link task's process span",
    )
    link = next(
        s
        for s in linked
        if s.name == "process it_tasks.add"
        and s.attributes.get("messaging.message.id") not in step_ids
    )
    assert link.trace_id == workflow.trace_id
    assert descends_from(link, workflow, linked)
