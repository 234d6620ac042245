"""Fixtures of the chart tests: every value set rendered once."""

from __future__ import annotations

import pytest
from chart_render import IDS, VALUE_SETS, Rendering, build


@pytest.fixture(scope="module")
def renderings() -> dict[str, Rendering]:
    """Every value set, rendered once by real Helm."""
    return {v.id: build(v) for v in VALUE_SETS}


@pytest.fixture(scope="module", params=IDS)
def rendering(request: pytest.FixtureRequest, renderings: dict[str, Rendering]) -> Rendering:
    return renderings[request.param]
