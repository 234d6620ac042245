"""How the HTTP API reads a selection of dead letters (the body of ``POST
/api/failed/retry`` and ``/api/failed/purge``) and a listing's query (``GET
/api/failed``): pure, without HTTP or an engine."""

from __future__ import annotations

import re

import pytest

from fastworker_control_plane.dashboard import actions
from fastworker_protocol.limits import MAX_TIMESTAMP
from fastworker_protocol.operations import MAX_FAILED_ACTED, MAX_FAILED_LISTED, FailedFilter

# --- the selection of a retry or a purge ----------------------------------------------------


def test_a_selection_by_ids_keeps_each_id_once_in_the_order_given() -> None:
    selection = actions.failed_selection(b'{"task_ids": ["b", "a", "b"]}')

    assert selection == actions.FailedSelection(FailedFilter(task_ids=["b", "a"]), False)


def test_all_matching_carries_the_filters() -> None:
    body = (
        b'{"all_matching": true, "task_name": "charge", "error_type": "ValueError",'
        b' "since": 1000, "until": 2000.5}'
    )

    selection = actions.failed_selection(body)

    assert selection.all_matching is True
    assert selection.filter == FailedFilter(
        task_name="charge", error_type="ValueError", since=1000.0, until=2000.5
    )


def test_all_matching_without_filters_selects_the_whole_store() -> None:
    selection = actions.failed_selection(b'{"all_matching": true}')

    assert selection == actions.FailedSelection(FailedFilter(), True)


def test_empty_filter_values_are_no_filter() -> None:
    body = b'{"all_matching": true, "task_name": "", "error_type": ""}'

    assert actions.failed_selection(body).filter == FailedFilter()


def test_filters_narrow_explicit_ids() -> None:
    selection = actions.failed_selection(b'{"task_ids": ["a"], "task_name": "charge"}')

    assert selection.filter == FailedFilter(task_ids=["a"], task_name="charge")
    assert selection.all_matching is False


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (b"{}", "select dead letters"),
        (b'{"task_ids": []}', "select dead letters"),
        (b'{"all_matching": false, "task_name": "charge"}', "select dead letters"),
        (b'{"task_ids": ["a"], "all_matching": true}', "not both"),
        (b'{"task_ids": [""]}', "cannot be empty"),
        (b'{"task_ids": "a"}', "Expected `array`"),
        (b'{"task_ids": [1]}', "Expected `str`"),
        (b'{"all_matching": "yes"}', "Expected `bool`"),
        (b'{"all_matching": true, "since": -1}', "Expected `float` >= 0"),
        (b'{"all_matching": true, "until": "yesterday"}', "Expected `float | null`"),
        (b'{"all_matching": true, "everything": true}', "unknown field `everything`"),
        (b'{"task_id": "a"}', "unknown field `task_id`"),
        (b"[]", "Expected `object`"),
        (b"", "bad selection"),
        (b"{not json", "bad selection"),
    ],
)
def test_a_bad_selection_is_refused_saying_why(body: bytes, says: str) -> None:
    with pytest.raises(actions.BadAction, match=re.escape(says)):
        actions.failed_selection(body)


def test_a_selection_of_more_ids_than_one_request_acts_on_is_refused() -> None:
    ids = ",".join(f'"t{n}"' for n in range(MAX_FAILED_ACTED + 1))

    with pytest.raises(actions.BadAction, match="length <= 10000"):
        actions.failed_selection(b'{"task_ids": [' + ids.encode() + b"]}")


def test_a_time_past_the_protocols_limit_is_refused() -> None:
    body = b'{"all_matching": true, "since": %d}' % (int(MAX_TIMESTAMP) + 1)

    with pytest.raises(actions.BadAction, match="<="):
        actions.failed_selection(body)


# --- the listing's query ----------------------------------------------------------------------


def test_a_listing_without_parameters_lists_the_default_number_of_every_dead_letter() -> None:
    assert actions.failed_query({}) == actions.FailedQuery(FailedFilter(), 100)


def test_a_listing_reads_its_filters_and_limit() -> None:
    query = {
        "task_name": "charge",
        "error_type": "WorkerLost",
        "since": "1764680000.5",
        "until": "1764690000",
        "limit": "25",
    }

    assert actions.failed_query(query) == actions.FailedQuery(
        FailedFilter(
            task_name="charge", error_type="WorkerLost", since=1764680000.5, until=1764690000.0
        ),
        25,
    )


def test_empty_query_values_are_no_filter() -> None:
    query = {"task_name": "", "error_type": "", "since": "", "until": "", "limit": ""}

    assert actions.failed_query(query) == actions.FailedQuery(FailedFilter(), 100)


@pytest.mark.parametrize(
    ("query", "says"),
    [
        ({"limit": "0"}, "limit must be an integer from 1 to"),
        ({"limit": str(MAX_FAILED_LISTED + 1)}, "limit must be an integer from 1 to"),
        ({"limit": "ten"}, "limit must be an integer"),
        ({"limit": "-5"}, "limit must be an integer"),
        ({"since": "yesterday"}, "since must be Unix seconds"),
        ({"since": "-1"}, "since must be Unix seconds"),
        ({"until": "nan"}, "until must be Unix seconds"),
        ({"until": "inf"}, "until must be Unix seconds"),
    ],
)
def test_a_bad_listing_query_is_refused_saying_why(query: dict[str, str], says: str) -> None:
    with pytest.raises(actions.BadAction, match=re.escape(says)):
        actions.failed_query(query)
