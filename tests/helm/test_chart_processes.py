"""The subworkers' process pool in the chart: subworker.processes, .maxTasksPerChild and
.maxMemoryPerChild reach the subworker as --processes, --max-tasks-per-child and
--max-memory-per-child only when set (unset, the subworker keeps its own defaults), a pool
inherits or overrides them like concurrency, the schema refuses what the subworker would,
and the docs list them wherever they list what a pool may set."""

from __future__ import annotations

import argparse
import copy
import json
import os
import re
from typing import Any

import helm_python
import pytest
from chart_render import (
    CHART_DIR,
    SUBWORKER,
    Rendering,
    ValueSet,
    arg_value,
    build,
)
from helm_python.errors import HelmValuesError

# The chart's value -> the subworker's option.
FLAGS = {
    "processes": "--processes",
    "maxTasksPerChild": "--max-tasks-per-child",
    "maxMemoryPerChild": "--max-memory-per-child",
}


def args_of(deployment: dict[str, Any]) -> list[str]:
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    args: list[str] = container["args"]
    return args


def given(args: list[str], flag: str) -> bool:
    return any(a == flag or a.startswith(f"{flag}=") for a in args)


def subworker_args(r: Rendering) -> dict[str | None, list[str]]:
    """Each subworker Deployment's arguments, by pool (None: the one pool of old)."""
    return {pool: args_of(d) for pool, d in r.by_pool("Deployment").items()}


# --- rendering ------------------------------------------------------------------------------


def test_every_subworker_gets_exactly_the_process_flags_its_values_set(
    rendering: Rendering,
) -> None:
    [args] = subworker_args(rendering).values()
    for key, flag in FLAGS.items():
        value = rendering.values["subworker"].get(key)
        if value is None:
            assert not given(args, flag), (key, args)
        else:
            assert arg_value({"args": args}, flag) == str(value)


def test_by_default_the_chart_passes_no_process_flags(renderings: dict[str, Rendering]) -> None:
    [args] = subworker_args(renderings["default"]).values()
    assert not [f for f in FLAGS.values() if given(args, f)], args
    # The pools value set sets them for one pool only: the other keeps the defaults.
    pools = subworker_args(renderings["pools"])
    assert not [f for f in FLAGS.values() if given(pools["default"], f)]
    assert [arg_value({"args": pools["reports"]}, f) for f in FLAGS.values()] == [
        "4",
        "500",
        "1536",
    ]


def test_a_pool_takes_the_shared_process_settings_unless_it_sets_its_own() -> None:
    r = build(
        ValueSet(
            "processes-pools",
            {
                "subworker": {
                    "processes": 2,
                    "maxTasksPerChild": 100,
                    "maxMemoryPerChild": 512,
                    "pools": {
                        "shared": {"queues": ["default"]},
                        "own": {"queues": ["cpu"], "processes": 8, "maxMemoryPerChild": 256},
                        # null drops the shared value: the subworker's own default (never).
                        "unbounded": {"queues": ["long"], "maxTasksPerChild": None},
                    },
                }
            },
            frozenset(),
        )
    )
    found = {
        pool: {
            key: arg_value({"args": args}, flag) for key, flag in FLAGS.items() if given(args, flag)
        }
        for pool, args in subworker_args(r).items()
    }
    assert found == {
        "shared": {"processes": "2", "maxTasksPerChild": "100", "maxMemoryPerChild": "512"},
        "own": {"processes": "8", "maxTasksPerChild": "100", "maxMemoryPerChild": "256"},
        "unbounded": {"processes": "2", "maxMemoryPerChild": "512"},
    }


def test_the_subworker_parses_the_rendered_flags_to_the_numbers_set_a_million_and_up_too(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Numbers from values files reach templates as floats; printed plainly, a million is
    # "1e+06", which the subworker's int options refuse.
    from fastworker_subworker.cli import configure_parser

    for key in [k for k in os.environ if k.startswith("FASTWORKER_")]:
        monkeypatch.delenv(key)  # the parser's defaults come from these: none may leak in
    settings = {
        "concurrency": 1_000_000,
        "processes": 3,
        "maxTasksPerChild": 10_000_000,
        "maxMemoryPerChild": 2_000_000,
    }
    r = build(ValueSet("processes-large", {"subworker": settings}, frozenset()))
    args = configure_parser(argparse.ArgumentParser()).parse_args(r.container(SUBWORKER)["args"])
    assert (
        args.concurrency,
        args.processes,
        args.max_tasks_per_child,
        args.max_memory_per_child,
    ) == tuple(settings.values())


# --- the schema --------------------------------------------------------------------------------


def validate(values: dict[str, Any]) -> None:
    helm_python.Chart.load(CHART_DIR).validate_schema(copy.deepcopy(values))


@pytest.mark.parametrize("key", FLAGS)
@pytest.mark.parametrize(
    ("bad", "problem"), [(0, "minimum"), (-1, "minimum"), ("4", "string"), (1.5, "number")]
)
@pytest.mark.parametrize("where", ["subworker", "pool"])
def test_the_schema_refuses_a_process_setting_below_1_or_not_an_integer(
    key: str, bad: Any, problem: str, where: str
) -> None:
    if where == "subworker":
        values, path = {"subworker": {key: bad}}, f"at '/subworker/{key}'"
    else:
        values = {"subworker": {"pools": {"a": {key: bad}}}}
        path = f"at '/subworker/pools/a/{key}'"
    with pytest.raises(HelmValuesError) as caught:
        validate(values)
    assert path in str(caught.value)
    assert problem in str(caught.value)


@pytest.mark.parametrize("key", FLAGS)
def test_the_schema_takes_null_and_positive_integers_for_each_process_setting(key: str) -> None:
    validate({"subworker": {key: 1, "pools": {"a": {key: None}, "b": {key: 64}}}})
    validate({"subworker": {key: None}})


# --- the docs ------------------------------------------------------------------------------------


def test_values_yaml_and_the_readme_list_exactly_the_keys_the_schema_lets_a_pool_set() -> None:
    schema = json.loads((CHART_DIR / "values.schema.json").read_text())
    [pool] = schema["properties"]["subworker"]["properties"]["pools"]["patternProperties"].values()
    allowed = set(pool["properties"])
    assert set(FLAGS) <= allowed

    values_yaml = (CHART_DIR / "values.yaml").read_text()
    comment = " ".join(
        line.strip().removeprefix("#").strip()
        for line in values_yaml.split("# A pool may set ", 1)[1].split(";", 1)[0].splitlines()
    )
    comment = re.sub(r"\([^)]*\)", "", comment)
    assert {k.strip() for k in re.split(r",|\band\b", comment)} - {""} == allowed

    readme = (CHART_DIR / "README.md").read_text()
    listed = readme.split("A pool may set ", 1)[1].split("Maps merge", 1)[0]
    assert set(re.findall(r"`([A-Za-z]+)`", listed)) == allowed


@pytest.mark.parametrize("key", FLAGS)
def test_the_readme_values_table_has_a_row_for_each_process_setting(key: str) -> None:
    readme = (CHART_DIR / "README.md").read_text()
    assert re.search(rf"^\| `subworker\.{key}` \|.*`{FLAGS[key]}`", readme, re.M)


def test_values_yaml_says_to_keep_the_memory_bound_under_the_limit_per_process() -> None:
    text = (CHART_DIR / "values.yaml").read_text()
    comment = text.split("maxTasksPerChild: null\n", 1)[1].split("maxMemoryPerChild: null", 1)[0]
    assert "memory limit" in comment
    assert "divided by processes" in comment
    assert "worker_crashed" in comment
