"""What a subworker has run: outcomes by task name and a run-time histogram, as plain
numbers read by its metrics endpoint at scrape time (recording is a dict lookup and an
add)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from fastworker_common.histogram import Histogram
from fastworker_protocol import FailureReason, Outcome


@dataclass
class RunStats:
    outcomes: Counter[tuple[str, str]] = field(default_factory=Counter)  # (name, outcome)
    run_time: dict[str, Histogram] = field(default_factory=dict)

    def record(self, name: str, outcome: Outcome) -> None:
        """One attempt ended: ``success``, or its error's reason (``exception``,
        ``timeout``, ``cancelled``, ``interrupted``, ``unserializable_result``)."""
        if outcome.ok:
            kind = "success"
        else:
            kind = outcome.error.reason if outcome.error else FailureReason.EXCEPTION
        self.outcomes[name, kind] += 1
        if outcome.started_at is not None and outcome.finished_at is not None:
            histogram = self.run_time.get(name)
            if histogram is None:
                histogram = self.run_time[name] = Histogram()
            histogram.observe(max(0.0, outcome.finished_at - outcome.started_at))
