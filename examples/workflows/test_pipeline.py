from tasks import square, total

from fastworker import chord


def test_the_chord_totals_the_squares(fastworker_cluster, fastworker_client):
    workflow_id = fastworker_client.submit_workflow(
        chord([square.s(i) for i in range(10)], total.s())
    )
    fastworker_cluster.drain()
    info = fastworker_client.wait_workflow(workflow_id)
    assert info.state == "success"
    assert fastworker_client.wait(info.steps[-1].task_id) == 285
