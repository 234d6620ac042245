"""The benchmark's command line: parse flags, run everything, always stop every process."""

from __future__ import annotations

import argparse
import asyncio
import shutil
import signal
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from bench.config import SCENARIOS, SMOKE_SIZES, BenchConfig, Sizes
from bench.procs import BENCH_DIR, Supervisor
from bench.report import add_floor_ratios, document, format_table, write_json
from bench.runner import Runner

DEFAULT_OUT = BENCH_DIR / "results" / "latest.json"
EXIT_FAILED = 1
EXIT_INTERRUPTED = 130


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench", description="Benchmark FastWorker against a bare NNG floor."
    )
    parser.add_argument(
        "--repeats", type=int, default=None, help="runs per scenario (default 3; 1 with --smoke)"
    )
    parser.add_argument(
        "--smoke", action="store_true", help="a few hundred tasks per scenario (for tests)"
    )
    parser.add_argument(
        "--only",
        type=_scenario_list,
        default=SCENARIOS,
        metavar="SCENARIO[,..]",
        help=f"run only these, of: {', '.join(SCENARIOS)}",
    )
    parser.add_argument(
        "--soak-seconds",
        type=float,
        default=None,
        help="how long the soak scenario runs (default 300; 4 with --smoke)",
    )
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="where to write the JSON")
    args = parser.parse_args(argv)
    if args.repeats is not None and args.repeats < 1:
        parser.error("--repeats must be at least 1")
    if args.soak_seconds is not None and not args.soak_seconds > 0:
        parser.error("--soak-seconds must be a positive number")
    return args


def _scenario_list(text: str) -> tuple[str, ...]:
    names = {n.strip() for n in text.split(",") if n.strip()}
    unknown = names - set(SCENARIOS)
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"unknown scenario(s) {sorted(unknown)}; choose from {', '.join(SCENARIOS)}"
        )
    return tuple(n for n in SCENARIOS if n in names)


def config_from(args: argparse.Namespace) -> BenchConfig:
    repeats = args.repeats if args.repeats is not None else (1 if args.smoke else 3)
    sizes = SMOKE_SIZES if args.smoke else Sizes()
    if args.soak_seconds is not None:
        sizes = replace(sizes, soak_seconds=args.soak_seconds)
    return BenchConfig(sizes=sizes, repeats=repeats, smoke=args.smoke, only=args.only)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    config = config_from(args)
    # Ctrl-C and SIGTERM both raise KeyboardInterrupt, so every process is stopped (SIGINT
    # too: a shell starts background jobs with it ignored).
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.default_int_handler)
    log_dir = Path(tempfile.mkdtemp(prefix="fastworker-bench-"))
    supervisor = Supervisor(log_dir)
    try:
        results = asyncio.run(Runner(config, supervisor).run())
    except KeyboardInterrupt:
        print("interrupted: every process stopped, nothing written", file=sys.stderr)
        return EXIT_INTERRUPTED
    finally:
        supervisor.stop_all()
    add_floor_ratios(results)
    print(format_table(results))
    write_json(args.out, document(config, results))
    print(f"\nresults written to {args.out}")
    failed = any("error" in entry for entry in results.values())
    if failed:
        print(f"some scenarios failed; process logs kept in {log_dir}", file=sys.stderr)
        return EXIT_FAILED
    shutil.rmtree(log_dir, ignore_errors=True)
    return 0
