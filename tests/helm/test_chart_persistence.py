"""The control plane's durable state in the Helm chart (``controlPlane.persistence``): the
PersistentVolumeClaim, where the Deployment mounts it, the ``--state-dir`` the control plane
gets, and what changes when persistence is off or a claim of your own is used.

Rendered by real Helm, like the rest of the chart's tests; the rendered arguments are also
parsed by the control plane's own command-line parser.
"""

from __future__ import annotations

import argparse
import copy
import os
import re
from typing import Any

import helm_python
import pytest
from chart_render import (
    CHART_DIR,
    CONTROL_PLANE,
    FULLNAME,
    PVC,
    SUBWORKER,
    VALUE_SETS,
    Rendering,
    ValueSet,
    arg_value,
    build,
    labels_of,
    merged,
    render,
)
from helm_python.errors import HelmValuesError

from fastworker_control_plane.cli import configure_parser

STATE_DIR = "/var/lib/fastworker"
CLAIM = f"{FULLNAME}-control-plane-state"
KEEP = {"helm.sh/resource-policy": "keep"}
# What Kubernetes accepts as a PersistentVolumeClaim name (a DNS subdomain), kept to 63.
CLAIM_NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")

PERSISTENT_IDS = [
    v.id for v in VALUE_SETS if merged(v.values)["controlPlane"]["persistence"]["enabled"]
]


def persistence(**values: Any) -> Rendering:
    """The chart rendered with these ``controlPlane.persistence`` values."""
    return build(ValueSet("persistence", {"controlPlane": {"persistence": values}}, frozenset()))


def pod_spec(r: Rendering, component: str = CONTROL_PLANE) -> dict[str, Any]:
    spec: dict[str, Any] = r.deployment(component)["spec"]["template"]["spec"]
    return spec


def state_volume(r: Rendering, component: str = CONTROL_PLANE) -> dict[str, Any] | None:
    """The volume mounted at the state dir (None: nothing is), after checking it is
    mounted once and writable."""
    mounts = [m for m in r.container(component)["volumeMounts"] if m["mountPath"] == STATE_DIR]
    if not mounts:
        return None
    [mount] = mounts
    assert not mount.get("readOnly", False), mount
    volumes: list[dict[str, Any]] = pod_spec(r, component)["volumes"]
    [volume] = [v for v in volumes if v["name"] == mount["name"]]
    return volume


def state_claim(r: Rendering) -> str:
    """The claim the control plane's state dir is on (and nothing else backs it)."""
    volume = state_volume(r)
    assert volume is not None, "nothing is mounted at the state dir"
    assert set(volume) == {"name", "persistentVolumeClaim"}, volume
    claim: str = volume["persistentVolumeClaim"]["claimName"]
    return claim


def state_dir_sources(r: Rendering, component: str) -> list[str]:
    """Every place this component is given a state dir: flags, env, the ConfigMap."""
    container = r.container(component)
    found = [a for a in container["args"] if a.split("=", 1)[0] == "--state-dir"]
    found += [e["name"] for e in container.get("env", []) if e["name"] == "FASTWORKER_STATE_DIR"]
    found += [k for k in r.one("ConfigMap")["data"] if k == "FASTWORKER_STATE_DIR"]
    return found


# --- the defaults -------------------------------------------------------------------------


def test_persistence_is_on_by_default_with_a_1gi_read_write_once_claim() -> None:
    assert merged({})["controlPlane"]["persistence"] == {
        "enabled": True,
        "size": "1Gi",
        "storageClass": "",
        "accessModes": ["ReadWriteOnce"],
        "existingClaim": "",
        "annotations": {},
    }


def test_by_default_the_chart_claims_1gi_on_the_default_class_and_keeps_it_on_uninstall(
    renderings: dict[str, Rendering],
) -> None:
    r = renderings["default"]
    [pvc] = r.of_kind("PersistentVolumeClaim")
    assert pvc["apiVersion"] == "v1"
    assert pvc["metadata"]["name"] == CLAIM
    assert pvc["metadata"]["annotations"] == KEEP
    assert labels_of(pvc)["app.kubernetes.io/component"] == CONTROL_PLANE
    # No storageClassName at all: the cluster's default class provisions it.
    assert pvc["spec"] == {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": "1Gi"}},
    }
    assert [path for path, obj in r.objects if obj is pvc] == [PVC]


def test_by_default_the_control_plane_journals_to_the_claim_mounted_at_var_lib_fastworker(
    renderings: dict[str, Rendering],
) -> None:
    r = renderings["default"]
    assert state_claim(r) == CLAIM
    assert arg_value(r.container(CONTROL_PLANE), "--state-dir") == STATE_DIR
    # Given once, as a flag like every other setting of the control plane.
    assert state_dir_sources(r, CONTROL_PLANE) == [f"--state-dir={STATE_DIR}"]
    # The scratch emptyDir stays, and is not where the state goes.
    assert {"name": "tmp", "mountPath": "/tmp"} in r.container(CONTROL_PLANE)["volumeMounts"]


@pytest.mark.parametrize("value_set", PERSISTENT_IDS)
def test_a_persistent_control_plane_is_one_replica_replaced_by_recreate_with_fs_group_10001(
    value_set: str, renderings: dict[str, Rendering]
) -> None:
    r = renderings[value_set]
    spec = r.deployment(CONTROL_PLANE)["spec"]
    # The claim is ReadWriteOnce and the state dir is locked: never two control planes.
    assert spec["replicas"] == 1
    assert spec["strategy"] == {"type": "Recreate"}
    security = pod_spec(r)["securityContext"]
    # fsGroup makes the volume writable by the non-root user under a read-only root.
    assert security["fsGroup"] == 10001
    assert security["runAsUser"] == 10001
    assert r.container(CONTROL_PLANE)["securityContext"]["readOnlyRootFilesystem"] is True
    assert state_volume(r) is not None


def test_the_subworkers_and_the_test_pod_get_no_state_dir_and_no_claim(
    rendering: Rendering,
) -> None:
    assert state_dir_sources(rendering, SUBWORKER) == []
    assert state_volume(rendering, SUBWORKER) is None
    for name, pod in rendering.pod_templates():
        if name == rendering.deployment(CONTROL_PLANE)["metadata"]["name"]:
            continue
        claims = [v for v in pod["spec"].get("volumes", []) if "persistentVolumeClaim" in v]
        assert claims == [], name


@pytest.fixture
def no_fastworker_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The parser takes its defaults from FASTWORKER_* variables: none may leak in."""
    for key in list(os.environ):
        if key.startswith("FASTWORKER_"):
            monkeypatch.delenv(key)


@pytest.mark.usefixtures("no_fastworker_env")
def test_the_real_control_plane_parser_reads_the_rendered_state_dir(
    renderings: dict[str, Rendering],
) -> None:
    parser = configure_parser(argparse.ArgumentParser(prog="fastworker-control-plane"))
    durable = parser.parse_args(renderings["default"].container(CONTROL_PLANE)["args"])
    assert durable.state_dir == STATE_DIR
    in_memory = parser.parse_args(renderings["everything-off"].container(CONTROL_PLANE)["args"])
    assert in_memory.state_dir is None


def test_the_notes_say_where_the_state_is_kept(renderings: dict[str, Rendering]) -> None:
    assert f"PersistentVolumeClaim {CLAIM} (`helm uninstall` keeps it" in (
        renderings["default"].notes
    )
    assert "in memory only" in renderings["everything-off"].notes
    assert "in memory only" not in renderings["default"].notes


# --- options --------------------------------------------------------------------------------


def test_an_existing_claim_is_mounted_and_the_chart_creates_none(
    renderings: dict[str, Rendering],
) -> None:
    r = renderings["existing-claim"]
    assert r.of_kind("PersistentVolumeClaim") == []
    assert PVC not in r.manifests
    assert state_claim(r) == "fastworker-journal"
    assert arg_value(r.container(CONTROL_PLANE), "--state-dir") == STATE_DIR
    assert "PersistentVolumeClaim fastworker-journal\n" in r.notes  # no "keeps it": not ours


@pytest.mark.parametrize(
    ("storage_class", "expected"),
    [
        pytest.param("-", "", id="dash-means-no-dynamic-provisioning"),
        pytest.param("fast-ssd", "fast-ssd", id="named-class"),
        pytest.param("", None, id="empty-means-the-cluster-default"),
    ],
)
def test_the_storage_class_follows_the_helm_convention(
    storage_class: str, expected: str | None
) -> None:
    r = persistence(storageClass=storage_class)
    [pvc] = r.of_kind("PersistentVolumeClaim")
    if expected is None:
        assert "storageClassName" not in pvc["spec"]
    else:
        assert pvc["spec"]["storageClassName"] == expected
        # Quoted, so "" is an empty string and not read back as null.
        assert f'storageClassName: "{expected}"' in r.manifests[PVC]


def test_size_access_modes_and_annotations_reach_the_claim(
    renderings: dict[str, Rendering],
) -> None:
    r = renderings["persistence-options"]
    [pvc] = r.of_kind("PersistentVolumeClaim")
    assert pvc["spec"] == {
        "accessModes": ["ReadWriteOncePod"],
        "storageClassName": "",
        "resources": {"requests": {"storage": "20Gi"}},
    }
    assert pvc["metadata"]["annotations"] == {"example.com/backup": "daily", **KEEP}
    assert state_claim(r) == pvc["metadata"]["name"] == CLAIM


def test_the_keep_policy_cannot_be_annotated_away() -> None:
    r = persistence(annotations={"helm.sh/resource-policy": "delete"})
    [pvc] = r.of_kind("PersistentVolumeClaim")
    assert pvc["metadata"]["annotations"] == KEEP


def test_a_long_release_name_still_gives_a_valid_claim_name_that_the_deployment_uses() -> None:
    r = build(ValueSet("long", {"fullnameOverride": "f" * 60}, frozenset()))
    [pvc] = r.of_kind("PersistentVolumeClaim")
    name = pvc["metadata"]["name"]
    assert len(name) <= 63
    assert CLAIM_NAME.fullmatch(name), name
    assert state_claim(r) == name


# --- persistence off -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "values",
    [
        pytest.param({"enabled": False}, id="disabled"),
        pytest.param({"enabled": False, "existingClaim": "mine"}, id="disabled-with-a-claim"),
    ],
)
def test_with_persistence_off_the_state_is_in_memory_with_no_claim_and_no_volume(
    values: dict[str, Any],
) -> None:
    r = persistence(**values)
    assert r.of_kind("PersistentVolumeClaim") == []
    assert PVC not in r.manifests
    assert state_dir_sources(r, CONTROL_PLANE) == []
    # Not even an emptyDir stands in for the state: only the scratch /tmp is mounted.
    assert r.container(CONTROL_PLANE)["volumeMounts"] == [{"name": "tmp", "mountPath": "/tmp"}]
    assert pod_spec(r)["volumes"] == [{"name": "tmp", "emptyDir": {}}]
    assert r.deployment(CONTROL_PLANE)["spec"]["strategy"] == {"type": "Recreate"}
    assert "in memory only" in r.notes


# --- the values schema ------------------------------------------------------------------------

PATH = "at '/controlPlane/persistence"
BAD_PERSISTENCE = [
    pytest.param({"size": 1}, f"{PATH}/size'", "got number, want string", id="size-a-number"),
    pytest.param({"size": "1GB"}, f"{PATH}/size'", "does not match pattern", id="size-1GB"),
    pytest.param({"sizee": "1Gi"}, f"{PATH}'", "'sizee' not allowed", id="unknown-key"),
    pytest.param({"enabled": "yes"}, f"{PATH}/enabled'", "want boolean", id="enabled-a-string"),
    pytest.param({"storageClass": 5}, f"{PATH}/storageClass'", "want string", id="class-number"),
    pytest.param(
        {"accessModes": ["ReadOnlyMany"]},
        f"{PATH}/accessModes/0'",
        "must be one of",
        id="read-only-access",
    ),
    pytest.param({"accessModes": []}, f"{PATH}/accessModes'", "minItems", id="no-access-mode"),
    pytest.param(
        {"existingClaim": "My_Claim"},
        f"{PATH}/existingClaim'",
        "does not match pattern",
        id="claim-not-a-dns-name",
    ),
    pytest.param(
        {"annotations": {"n": 1}}, f"{PATH}/annotations/n'", "want string", id="annotation-int"
    ),
]


@pytest.mark.parametrize(("values", "path", "problem"), BAD_PERSISTENCE)
def test_the_schema_rejects_bad_persistence_values_naming_the_path(
    values: dict[str, Any], path: str, problem: str
) -> None:
    bad = {"controlPlane": {"persistence": values}}
    with pytest.raises(HelmValuesError) as caught:
        helm_python.Chart.load(CHART_DIR).validate_schema(copy.deepcopy(bad))
    assert path in str(caught.value)
    assert problem in str(caught.value)
    with pytest.raises(HelmValuesError, match=re.escape(path)):
        render(bad)


def test_the_chart_readme_documents_every_persistence_key() -> None:
    readme = (CHART_DIR / "README.md").read_text()
    assert "## Persistence" in readme
    for key in merged({})["controlPlane"]["persistence"]:
        assert re.search(rf"`(controlPlane\.persistence)?\.{key}`", readme), key
