from tasks import add, alert, charge, ship, square, total

from fastworker import SyncClient, chord

with SyncClient() as client:
    # A chain: add(1, 2) -> add(3, 3) -> add(6, 4); each result is the next one's first argument
    chained = client.submit_workflow(add.s(1, 2) | add.s(3) | add.s(4))
    print("chain:", chained.get(timeout=30))  # the value it leaves: its last step's result

    # A chord: ten squares side by side, then total() gets their list, in order
    chorded = client.submit_workflow(chord([square.s(i) for i in range(10)], total.s()))
    print("chord:", chorded.get(timeout=30), chorded.status())

    # A failing step: ship() is skipped, and alert() is queued with the workflow id
    failing = client.submit_workflow(
        charge.s(42) | ship.s(), workflow_id="order-42", link_error=alert.s()
    )
    info = client.wait_workflow(failing, timeout=30)
    print("order:", info.state, [step.state.value for step in info.steps])
    print("alert:", client.wait("order-42.link_error-0", timeout=30))
