"""``uv run python -m bench``: run the benchmark, print the table, write the JSON."""

from __future__ import annotations

import sys

from bench.cli import main

sys.exit(main())
