from tasks import square, total

from fastworker import chord


def test_the_chord_totals_the_squares(fastworker_cluster, fastworker_client):
    handle = fastworker_client.submit_workflow(chord([square.s(i) for i in range(10)], total.s()))
    fastworker_cluster.drain()
    assert handle.get() == 285  # the chord's callback's result
