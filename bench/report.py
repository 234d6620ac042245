"""The benchmark's outputs: the machine it ran on, ratios to the floor, the printed table
and the JSON document."""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from bench.config import ALL_TOPOLOGIES, SCENARIOS, BenchConfig

Results = dict[str, dict[str, Any]]

# FastWorker metric -> the floor figure it is compared with (the topology is appended).
FLOOR_MATCH = {
    "latency.p50_ms": "floor.latency.p50_ms",
    "latency.p99_ms": "floor.latency.p99_ms",
    "latency.p999_ms": "floor.latency.p999_ms",
    "pipelined.tasks_per_s": "floor.tasks_per_s.single",
    "batch.tasks_per_s": "floor.tasks_per_s.batched",
    # The blocking client against blocking round trips: one task per call, one call at a time.
    "sync.enqueue_per_s": "floor.blocking_rt_per_s",
    "sync.e2e_per_s": "floor.blocking_rt_per_s",
    "sync.p50_ms": "floor.blocking_rt_p50_ms",
    "sync.p99_ms": "floor.blocking_rt_p99_ms",
}


def machine() -> dict[str, Any]:
    return {
        "cores": os.cpu_count(),
        "cpu_model": _cpu_model(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "versions": {name: _version(name) for name in ("fastworker", "pynng", "msgspec")},
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
    }


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _version(name: str) -> str:
    try:
        return version(name)
    except PackageNotFoundError:
        return "unknown"


def split_key(key: str) -> tuple[str, str, str]:
    """``latency.p50_ms.cp+1sw`` -> (``latency``, ``p50_ms``, ``cp+1sw``); topology ``-``
    for keys without one."""
    scenario, _, rest = key.partition(".")
    metric, _, last = rest.rpartition(".")
    if last in ALL_TOPOLOGIES:
        return scenario, metric, last
    return scenario, rest, "-"


def add_floor_ratios(results: Results) -> None:
    """Give every comparable entry ``vs_floor``: its median over the floor's median."""
    for key, entry in results.items():
        scenario, metric, _ = split_key(key)
        floor = results.get(FLOOR_MATCH.get(f"{scenario}.{metric}", ""), {})
        if "median" in entry and floor.get("median"):
            entry["vs_floor"] = {
                "floor": FLOOR_MATCH[f"{scenario}.{metric}"],
                "ratio": entry["median"] / floor["median"],
            }


def fmt(value: float, unit: str = "") -> str:
    if unit == "tasks/s" or abs(value) >= 1000:
        return f"{value:,.0f}"
    if unit == "ratio":
        return f"{value:.3f}"
    return f"{value:.3g}" if abs(value) < 100 else f"{value:.1f}"


def _row(key: str, entry: dict[str, Any]) -> list[str]:
    scenario, metric, topology = split_key(key)
    if "error" in entry:
        return [scenario, metric, topology, "ERROR", "(see below)", "", ""]
    unit = entry["unit"]
    spread = f"{fmt(entry['min'], unit)}..{fmt(entry['max'], unit)}"
    ratio = entry.get("vs_floor")
    versus = f"{ratio['ratio']:.2f}x {ratio['floor'].removeprefix('floor.')}" if ratio else ""
    return [scenario, metric, topology, fmt(entry["median"], unit), spread, unit, versus]


def _order(results: Results) -> list[str]:
    """Scenario order, then each metric's first appearance, then topology order."""
    first_seen: dict[tuple[str, str], int] = {}
    for key in results:
        first_seen.setdefault(split_key(key)[:2], len(first_seen))

    def rank(key: str) -> tuple[int, int, int]:
        scenario, metric, topology = split_key(key)
        topo = ALL_TOPOLOGIES.index(topology) if topology in ALL_TOPOLOGIES else -1
        return SCENARIOS.index(scenario), first_seen[(scenario, metric)], topo

    return sorted(results, key=rank)


def format_table(results: Results) -> str:
    header = ["scenario", "metric", "topology", "median", "min..max", "unit", "vs floor (median)"]
    rows = [header] + [_row(key, results[key]) for key in _order(results)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    numeric = {3, 4}
    lines = []
    for n, row in enumerate(rows):
        cells = [
            c.rjust(w) if i in numeric and n else c.ljust(w)
            for i, (c, w) in enumerate(zip(row, widths, strict=True))
        ]
        lines.append("  ".join(cells).rstrip())
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    lines.append(LEGEND)
    lines.extend(_errors(results))
    return "\n".join(lines)


LEGEND = (
    "vs floor: FastWorker's median / the floor's median (latency: above 1 is slower; "
    "tasks/s: below 1 is slower)."
)


def _errors(results: Results) -> list[str]:
    """One line per failed scenario run (its metrics share the error)."""
    seen: dict[tuple[str, str], str] = {}
    for key, entry in results.items():
        if "error" in entry:
            scenario, _, topology = split_key(key)
            seen.setdefault((scenario, topology), str(entry["error"]))
    return [f"ERROR {s} {t}: {message}" for (s, t), message in seen.items()]


def document(config: BenchConfig, results: Results) -> dict[str, Any]:
    return {"machine": machine(), "config": config.as_json(), "results": results}


def write_json(path: Path, doc: dict[str, Any]) -> None:
    """Written whole or not at all (a temporary file renamed over ``path``)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(doc, indent=2) + "\n")
    os.replace(tmp, path)
