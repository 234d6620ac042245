"""Following the leader of replicated control planes: the rules of ``fastworker_common.leader``,
without sockets (``test_follow_leader`` drives them over real ones)."""

from __future__ import annotations

from fastworker._calls import Budget
from fastworker_common.leader import Attempts, follows, rewait, stale, succeeds
from fastworker_protocol import Announce, Get


def announced(instance_id: str, epoch: int) -> Announce:
    return Announce(instance_id=instance_id, submit=[], results="", registration="", epoch=epoch)


def test_only_a_nonzero_epoch_below_the_highest_heard_is_stale() -> None:
    assert stale(announced("a", 4), highest=5)
    assert not stale(announced("a", 5), highest=5)
    assert not stale(announced("b", 6), highest=5)
    assert not stale(announced("c", 0), highest=5)  # a control plane alone is always heard


def test_a_successor_is_another_instance_of_an_epoch_at_least_as_high() -> None:
    current = announced("a", 5)
    assert succeeds(announced("b", 6), current)
    assert succeeds(announced("b", 5), current)
    assert not succeeds(announced("a", 6), current)  # the same leader, re-elected
    assert not succeeds(announced("c", 4), current)


def test_only_a_replicated_control_plane_found_by_discovery_is_followed() -> None:
    assert follows(announced("a", 5), explicit_address=None)
    assert not follows(announced("a", 0), explicit_address=None)
    assert not follows(announced("a", 5), explicit_address="tcp://h:5555")
    assert not follows(None, explicit_address=None)


def test_a_failed_attempt_looks_until_its_slot_ends_and_the_last_until_the_deadline() -> None:
    attempts = Attempts(Budget(timeout=8.0, retries=3, connect_timeout=0.5), started=100.0)
    assert attempts.timeout(100.0) == 2.0  # four slots of 2 s
    assert attempts.look_until(100.5) == 102.0  # refused at once: the rest of its slot
    assert attempts.look_until(102.0) == 102.5  # its slot used up: connect_timeout still
    assert attempts.again(102.5, connected=False, following=True)  # no connect give-up
    attempts.attempt = 3
    assert attempts.look_until(106.0) == 108.0


def test_a_client_alone_still_gives_up_after_connect_timeout() -> None:
    attempts = Attempts(Budget(timeout=8.0, retries=3, connect_timeout=0.5), started=100.0)
    attempts.timeout(100.0)
    assert not attempts.again(100.5, connected=False, following=False)


def test_an_attempt_that_waited_its_whole_connect_budget_spent_it_to_the_millisecond() -> None:
    # Given a slot no longer than the connect budget (4 s over 4 attempts, 1 s each)
    attempts = Attempts(Budget(timeout=4.0, retries=3, connect_timeout=1.0), started=100.0)
    attempts.timeout(100.0)
    # When NNG's wait, in whole milliseconds rounded down, ends a hair before the budget
    # Then the call gives up: it does not wait a second connect budget
    assert not attempts.again(100.9995, connected=False, following=False)
    assert attempts.again(100.9, connected=False, following=False)  # well before: again


def test_a_held_wait_resent_waits_only_for_what_is_left() -> None:
    assert rewait(Get(task_ids=["t"], wait=8.0), 8.0, 3.0) == Get(task_ids=["t"], wait=5.0)
    assert rewait(Get(task_ids=["t"]), None, 3.0) == Get(task_ids=["t"])
