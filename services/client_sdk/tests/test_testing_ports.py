"""The port picker every test, benchmark and guide uses: never a port in the kernel's
ephemeral range, never overlapping blocks, and disjoint slices for pytest-xdist workers."""

from __future__ import annotations

import socket

import pytest

from fastworker.testing import free_port_block, free_ports_apart
from fastworker.testing.ports import _span, ephemeral_range


def test_the_ephemeral_range_is_read_from_the_kernels_file_or_assumed_from_32000() -> None:
    assert ephemeral_range("32768\t60999\n") == (32768, 60999)
    assert ephemeral_range("not numbers") == (32000, 60999)
    assert ephemeral_range("70000 80000") == (32000, 60999)


def test_no_block_ever_reaches_into_the_ephemeral_range() -> None:
    first, last = ephemeral_range()
    for size in (1, 7, 23):
        for _ in range(300):
            start = free_port_block(size)
            block = range(start, start + size)
            assert block[-1] < first or block[0] > last, (block, (first, last))
            assert block[0] >= 20_000


def test_a_picked_block_is_bindable_right_after_the_pick() -> None:
    start = free_port_block(4)
    held = []
    try:
        for port in range(start, start + 4):
            probe = socket.socket()
            held.append(probe)
            probe.bind(("127.0.0.1", port))
    finally:
        for probe in held:
            probe.close()


def test_a_port_someone_listens_on_is_never_picked() -> None:
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", free_port_block()))
        squatter.listen()
        taken = squatter.getsockname()[1]
        for _ in range(300):
            start = free_port_block(30)
            assert not start <= taken < start + 30


def test_blocks_picked_apart_never_overlap() -> None:
    for _ in range(100):
        starts = free_ports_apart(11, 1, 1, 6, 1)
        ports = [p for s, n in zip(starts, (11, 1, 1, 6, 1), strict=True) for p in range(s, s + n)]
        assert len(ports) == len(set(ports))


@pytest.mark.parametrize("workers", [2, 3, 8])
def test_xdist_workers_pick_from_slices_that_do_not_overlap(workers: int) -> None:
    kernel = (32768, 60999)
    slices = [_span(7, f"gw{i}", workers, kernel) for i in range(workers)]
    ports = [range(starts[0], starts[-1] + 7) for starts in slices]
    for i, mine in enumerate(ports):
        assert mine.start >= 20_000
        assert mine.stop <= kernel[0]
        for other in ports[i + 1 :]:
            assert mine.stop <= other.start or other.stop <= mine.start


def test_a_range_that_starts_too_low_leaves_the_ports_above_it() -> None:
    span = _span(5, None, 1, (10_000, 40_000))
    assert span.start > 40_000
    assert span[-1] + 5 <= 65_536


def test_picks_made_one_after_another_never_overlap_although_none_is_bound() -> None:
    blocks = [range(start, start + 6) for start in (free_port_block(6) for _ in range(60))]
    ports = [port for block in blocks for port in block]
    assert len(ports) == len(set(ports))


def test_an_empty_block_is_refused() -> None:
    with pytest.raises(ValueError, match="at least one port"):
        free_port_block(0)
