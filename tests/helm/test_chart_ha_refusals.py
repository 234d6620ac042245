"""Replicated control planes in the Helm chart: the values a replicated control plane
refuses (the render fails saying why, the schema names the path), and the README's "High
availability" section (what renders, how to choose, what was not verified)."""

from __future__ import annotations

import re
from typing import Any

import helm_python
import pytest
import yaml
from chart_render import CHART_DIR, render
from helm_python.errors import HelmRenderError, HelmValuesError

# --- what a replicated control plane refuses ----------------------------------------------------


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (
            {"controlPlane": {"persistence": {"enabled": False}}},
            "needs controlPlane.persistence.enabled",
        ),
        (
            {"controlPlane": {"persistence": {"existingClaim": "mine"}}},
            "cannot use controlPlane.persistence.existingClaim",
        ),
        (
            {"tls": {"enabled": True, "existingSecret": "fw-tls"}},
            "does not support tls.enabled yet",
        ),
    ],
    ids=["no-persistence", "existing-claim", "tls"],
)
def test_values_a_replicated_control_plane_cannot_run_with_fail_the_render_saying_why(
    values: dict[str, Any], message: str
) -> None:
    values = {**values, "controlPlane": {"replicas": 2, **values.get("controlPlane", {})}}
    with pytest.raises(HelmRenderError, match=re.escape(message)):
        render(values)


@pytest.mark.parametrize(
    ("values", "path"),
    [
        ({"replicas": 0}, "/controlPlane/replicas"),
        ({"replicas": 6}, "/controlPlane/replicas"),
        ({"ha": {"leaderElection": "kubernetes://jobs/other"}}, "/controlPlane/ha/leaderElection"),
        ({"ha": {"leaderElection": "etcd://etcd:2379"}}, "/controlPlane/ha/leaderElection"),
        ({"ha": {"antiAffinity": "never"}}, "/controlPlane/ha/antiAffinity"),
        ({"ha": {"leaseDuration": 0}}, "/controlPlane/ha/leaseDuration"),
        ({"ha": {"lease": 5}}, "/controlPlane/ha"),
    ],
    ids=[
        "zero",
        "six",
        "kubernetes-url",
        "no-prefix",
        "anti-affinity",
        "lease-zero",
        "unknown-key",
    ],
)
def test_the_schema_rejects_bad_ha_values_naming_the_path(
    values: dict[str, Any], path: str
) -> None:
    with pytest.raises(HelmValuesError, match=re.escape(path)):
        helm_python.Chart.load(CHART_DIR).validate_schema({"controlPlane": values})


# --- the README and values.yaml -------------------------------------------------------------------


def test_the_readme_says_what_renders_how_to_choose_and_what_was_not_verified() -> None:
    readme = (CHART_DIR / "README.md").read_text()
    section = readme.split("\n## High availability\n", 1)[1].split("\n## ", 1)[0]
    assert re.search(r"^\| `controlPlane\.replicas` \|", readme, re.M)
    ha_values = yaml.safe_load((CHART_DIR / "values.yaml").read_text())["controlPlane"]["ha"]
    for key in ha_values:
        assert re.search(rf"`controlPlane\.ha\.{key}[`:]", section), key
    for word in (
        "StatefulSet",
        "volumeClaimTemplates",
        "Lease",
        "Role",
        "PodDisruptionBudget",
        "etcd://",
        "OnDelete",
    ):
        assert word in section, word
    unverified = section.split("Not verified", 1)[1]
    for claim in ("API server", "RBAC", "rescheduling", "readiness"):
        assert claim in unverified, claim
