"""Priorities, the port map they index, and how addresses are written."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fastworker_protocol import (
    DEFAULT_BASE_PORT,
    DEFAULT_DISCOVERY_ADDRESS,
    DEFAULT_DISCOVERY_PORT,
    DEFAULT_HTTP_PORT,
    PortMap,
    Priority,
    tcp_address,
)

CHOICES = "critical, high, normal, low"


@st.composite
def any_case(draw: st.DrawFn, word: str) -> str:
    return "".join(c.upper() if draw(st.booleans()) else c for c in word)


@pytest.mark.parametrize("priority", list(Priority))
def test_parse_returns_a_member_unchanged(priority: Priority) -> None:
    assert Priority.parse(priority) is priority


@given(st.sampled_from(Priority).flatmap(lambda p: st.tuples(st.just(p), any_case(p.value))))
def test_parse_accepts_a_priority_name_in_any_case(case: tuple[Priority, str]) -> None:
    priority, name = case
    assert Priority.parse(name) is priority


@given(st.text().filter(lambda text: text.lower() not in {p.value for p in Priority}))
def test_parse_rejects_anything_else_naming_the_choices(text: str) -> None:
    with pytest.raises(ValueError, match=f"unknown priority .*: choose one of {CHOICES}$"):
        Priority.parse(text)


@pytest.mark.parametrize("text", ["", " high", "urgent", "0", "HIGHEST"])
def test_parse_rejects_near_misses(text: str) -> None:
    with pytest.raises(ValueError, match=CHOICES):
        Priority.parse(text)


def test_priorities_equal_their_lowercase_names() -> None:
    assert [p.value for p in Priority] == ["critical", "high", "normal", "low"]
    assert Priority.HIGH == "high"  # type: ignore[comparison-overlap]


def test_by_rank_lists_the_priorities_most_urgent_first() -> None:
    assert Priority.by_rank() == (Priority.CRITICAL, Priority.HIGH, Priority.NORMAL, Priority.LOW)
    assert [p.rank for p in Priority.by_rank()] == [0, 1, 2, 3]


def test_sorting_by_rank_puts_critical_first_and_low_last() -> None:
    shuffled = [Priority.LOW, Priority.CRITICAL, Priority.NORMAL, Priority.HIGH]
    assert sorted(shuffled, key=lambda p: p.rank) == list(Priority.by_rank())


def test_the_default_port_map_is_5555_to_5560() -> None:
    ports = PortMap()
    assert [ports.submission(p) for p in Priority.by_rank()] == [5555, 5556, 5557, 5558]
    assert (ports.results, ports.registration) == (5559, 5560)


def test_the_defaults_are_the_documented_ones() -> None:
    assert DEFAULT_BASE_PORT == 5555
    assert DEFAULT_DISCOVERY_PORT == 5550
    assert DEFAULT_DISCOVERY_ADDRESS == "tcp://127.0.0.1:5550"
    assert DEFAULT_HTTP_PORT == 8080
    assert PortMap().base == DEFAULT_BASE_PORT


@given(st.integers(min_value=1, max_value=65530))
def test_every_port_follows_from_the_base_port(base: int) -> None:
    ports = PortMap(base)
    submission = [ports.submission(p) for p in Priority.by_rank()]
    assert submission == [base + p.rank for p in Priority.by_rank()]
    assert (ports.results, ports.registration) == (base + 4, base + 5)
    assert len({*submission, ports.results, ports.registration}) == 6
    assert ports.registration <= 65535


@pytest.mark.parametrize("base", [1, 65530])
def test_a_base_port_at_either_end_of_the_range_is_accepted(base: int) -> None:
    assert PortMap(base).base == base


@given(st.integers(max_value=0) | st.integers(min_value=65531))
def test_a_base_port_that_leaves_no_room_for_six_ports_is_refused(base: int) -> None:
    with pytest.raises(ValueError, match=f"base port {base} leaves no room for its 6 ports"):
        PortMap(base)


def test_a_port_map_is_immutable() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        PortMap().base = 6000  # type: ignore[misc]


@pytest.mark.parametrize(
    ("host", "port", "address"),
    [
        ("127.0.0.1", 5555, "tcp://127.0.0.1:5555"),
        ("control-plane", 5559, "tcp://control-plane:5559"),
        ("::1", 5557, "tcp://[::1]:5557"),
        ("fd00::12:3", 5560, "tcp://[fd00::12:3]:5560"),
        ("[::1]", 5550, "tcp://[::1]:5550"),
    ],
)
def test_tcp_address_writes_host_and_port_bracketing_ipv6(
    host: str, port: int, address: str
) -> None:
    assert tcp_address(host, port) == address
