from fastworker import task


@task
def add(x: int, y: int) -> int:
    return x + y


@task
def square(n: int) -> int:
    return n * n


@task
def total(values: list[int]) -> int:
    return sum(values)


@task
def charge(order_id: int) -> str:
    raise RuntimeError(f"card declined for order {order_id}")


@task
def ship(receipt: str) -> str:
    return f"shipped with {receipt}"


@task
def alert(workflow_id: str) -> str:
    return f"paged on-call: workflow {workflow_id} failed"
