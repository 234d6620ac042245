"""TLS on the NNG sockets in the Helm chart (``tls.*``): the Secret each pod mounts and how
much of it, the ``FASTWORKER_TLS_*`` environment pointing into it, the ``tls+tcp://``
addresses, NOTES.txt, the schema, and the refusal to enable TLS without a Secret.

Rendered by real Helm, like the rest of the chart's tests. The rendered arguments and
environment are also read by the control plane's, the subworker's and ``fastworker
submit``'s own parsers, and handed to the TLS code with real certificates where the pods
would find them.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import helm_python
import pynng
import pytest
import trustme
import yaml
from chart_render import (
    CHART_DIR,
    CONTROL_PLANE,
    FULLNAME,
    NAMESPACE,
    RELEASE,
    SERVICE_HOST,
    SUBWORKER,
    Rendering,
    ValueSet,
    arg_value,
    build,
    merged,
    nng_scheme,
    render,
)
from fake_cli import helm_test_pod, run_test_pod
from helm_python.errors import HelmRenderError, HelmValuesError

from fastworker import TLS
from fastworker.cli.common import tls_from
from fastworker_common.tls import dial_config
from fastworker_control_plane.cli import configure_parser as control_plane_parser
from fastworker_subworker.cli import configure_parser as subworker_parser

SECRET = f"{FULLNAME}-tls"  # what the "tls" value set names
MOUNT = "/etc/fastworker/tls"
TEST = "test"  # the `helm test` pod, next to the two components
CLIENTS = (SUBWORKER, TEST)
CA_ONLY = [{"key": "ca.crt", "path": "ca.crt"}]
TLS_ENV = ("FASTWORKER_TLS_CERT", "FASTWORKER_TLS_KEY", "FASTWORKER_TLS_CA")


def with_tls(**values: Any) -> Rendering:
    """The chart rendered with TLS on from ``SECRET``, and these other values."""
    tls = {"enabled": True, "existingSecret": SECRET, **values.pop("tls", {})}
    return build(ValueSet("tls-custom", {**values, "tls": tls}, frozenset()))


def pods(r: Rendering) -> dict[str, tuple[dict[str, Any], dict[str, Any]]]:
    """(pod spec, its container) of the control plane, the subworkers and the test pod."""
    found = {
        component: (r.deployment(component)["spec"]["template"]["spec"], r.container(component))
        for component in (CONTROL_PLANE, SUBWORKER)
    }
    for pod in r.of_kind("Pod"):
        [container] = pod["spec"]["containers"]
        found[TEST] = (pod["spec"], container)
    return found


def tls_env(container: dict[str, Any]) -> dict[str, str]:
    """The container's ``FASTWORKER_TLS_*`` variables (all are plain values)."""
    env = [e for e in container.get("env", []) if e["name"].startswith("FASTWORKER_TLS_")]
    assert all(set(e) == {"name", "value"} for e in env), env
    return {e["name"]: e["value"] for e in env}


def secret_volumes(spec: dict[str, Any]) -> list[dict[str, Any]]:
    return [v for v in spec.get("volumes", []) if "secret" in v]


def tls_volume(spec: dict[str, Any], container: dict[str, Any], path: str = MOUNT) -> Any:
    """The one Secret volume of the pod, after checking it is mounted read-only at ``path``
    (and nowhere else)."""
    [volume] = secret_volumes(spec)
    mounts = [m for m in container.get("volumeMounts", []) if m["name"] == volume["name"]]
    assert mounts == [{"name": volume["name"], "mountPath": path, "readOnly": True}]
    return volume["secret"]


def nng_addresses(r: Rendering) -> list[str]:
    """Every ``...tcp://host:port`` the rendering writes (args, scripts, NOTES.txt)."""
    text = "\n".join([*r.manifests.values(), r.notes])
    return re.findall(r"[a-z+]*tcp://[^\s:'\"]+:\d+", text)


# --- off by default -----------------------------------------------------------------------------


def test_tls_is_off_by_default_with_the_secret_mounted_under_etc_fastworker() -> None:
    assert merged({})["tls"] == {"enabled": False, "existingSecret": "", "mountPath": MOUNT}


def test_every_nng_address_the_chart_writes_has_the_scheme_tls_enabled_calls_for(
    rendering: Rendering,
) -> None:
    addresses = nng_addresses(rendering)
    assert f"{nng_scheme(rendering)}{SERVICE_HOST}:5550" in addresses
    assert all(a.startswith(nng_scheme(rendering)) for a in addresses), addresses


def test_without_tls_no_pod_mounts_a_secret_or_gets_a_tls_setting(rendering: Rendering) -> None:
    if rendering.values["tls"]["enabled"]:
        return
    for name, (spec, container) in pods(rendering).items():
        assert secret_volumes(spec) == [], name
        assert tls_env(container) == {}, name
        mounts = [m["mountPath"] for m in container.get("volumeMounts", [])]
        assert MOUNT not in mounts, name
        assert not [a for a in container.get("args", []) if a.startswith("--tls")], name
    assert "tls+tcp" not in rendering.notes
    assert "--tls-ca" not in rendering.notes


# --- enabled ------------------------------------------------------------------------------------


def test_the_control_plane_mounts_the_whole_secret_and_reads_its_certificate_and_key(
    renderings: dict[str, Rendering],
) -> None:
    spec, container = pods(renderings["tls"])[CONTROL_PLANE]
    # All three keys, readable by the pod's fsGroup (10001) and no one else.
    assert tls_volume(spec, container) == {"secretName": SECRET, "defaultMode": 0o440}
    assert spec["securityContext"]["fsGroup"] == 10001
    # No FASTWORKER_TLS_CA: on the control plane it would require client certificates.
    assert tls_env(container) == {
        "FASTWORKER_TLS_CERT": f"{MOUNT}/tls.crt",
        "FASTWORKER_TLS_KEY": f"{MOUNT}/tls.key",
    }
    # Its other volumes stay: the scratch /tmp and the state claim.
    assert {v["name"] for v in spec["volumes"]} == {"tmp", "state", "tls"}


@pytest.mark.parametrize("pod", CLIENTS)
def test_subworkers_and_the_test_pod_get_only_the_ca_of_the_secret(
    pod: str, renderings: dict[str, Rendering]
) -> None:
    spec, container = pods(renderings["tls"])[pod]
    # An items projection: tls.key (and tls.crt) never reach these pods.
    assert tls_volume(spec, container) == {
        "secretName": SECRET,
        "defaultMode": 0o444,
        "items": CA_ONLY,
    }
    assert tls_env(container) == {"FASTWORKER_TLS_CA": f"{MOUNT}/ca.crt"}


def test_subworkers_and_the_test_pod_dial_the_service_over_tls(
    renderings: dict[str, Rendering],
) -> None:
    r = renderings["tls"]
    subworker = r.container(SUBWORKER)
    assert arg_value(subworker, "--discovery-address") == f"tls+tcp://{SERVICE_HOST}:5550"
    [script] = helm_test_pod(r)["spec"]["containers"][0]["args"]
    assert f"--address tls+tcp://{SERVICE_HOST}:5555 " in script
    # The control plane still advertises the Service's name: the one its certificate names.
    assert f"--advertise-host={SERVICE_HOST}" in r.container(CONTROL_PLANE)["args"]


def test_the_http_port_and_its_probes_are_untouched_by_tls(
    renderings: dict[str, Rendering],
) -> None:
    plain, tls = renderings["default"], renderings["tls"]
    for component in (CONTROL_PLANE, SUBWORKER):
        for key in ("ports", "startupProbe", "readinessProbe", "livenessProbe"):
            assert tls.container(component)[key] == plain.container(component)[key]
    assert tls.one("Service")["spec"] == plain.one("Service")["spec"]


def test_the_key_reaches_no_pod_but_the_control_plane(rendering: Rendering) -> None:
    for name, (spec, _) in pods(rendering).items():
        for volume in secret_volumes(spec):
            if name != CONTROL_PLANE:
                assert volume["secret"]["items"] == CA_ONLY, name


def test_a_custom_mount_path_moves_the_mounts_and_every_file_setting_together() -> None:
    r = with_tls(tls={"mountPath": "/run/fastworker-tls"})
    found = pods(r)
    tls_volume(*found[CONTROL_PLANE], path="/run/fastworker-tls")
    assert tls_env(found[CONTROL_PLANE][1])["FASTWORKER_TLS_KEY"] == "/run/fastworker-tls/tls.key"
    for pod in CLIENTS:
        tls_volume(*found[pod], path="/run/fastworker-tls")
        assert tls_env(found[pod][1]) == {"FASTWORKER_TLS_CA": "/run/fastworker-tls/ca.crt"}


def test_tls_and_the_auth_token_are_both_set_once_next_to_extra_env() -> None:
    extra = [{"name": "EXTRA", "value": "1"}]
    r = with_tls(
        auth={"enabled": True, "existingSecret": "fw-auth"},
        controlPlane={"extraEnv": extra},
        subworker={"extraEnv": extra},
    )
    for name, (_, container) in pods(r).items():
        names = [e["name"] for e in container["env"]]
        assert len(names) == len(set(names)), name
        assert "FASTWORKER_AUTH_TOKEN" in names, name
        assert set(names) & set(TLS_ENV), name
    for component in (CONTROL_PLANE, SUBWORKER):  # the test pod takes no extraEnv
        assert r.container(component)["env"][-1] == extra[0], component


# --- the components' own parsers, with real certificates where the pods find them -------------


@pytest.fixture
def no_fastworker_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The parsers take their defaults from FASTWORKER_* variables: none may leak in."""
    for key in list(os.environ):
        if key.startswith("FASTWORKER_"):
            monkeypatch.delenv(key)


def secret_data(name: str) -> dict[str, bytes]:
    """What a cert-manager Certificate for ``name`` writes into its Secret."""
    ca = trustme.CA()
    cert = ca.issue_cert(name)
    return {
        "tls.crt": cert.cert_chain_pems[0].bytes(),
        "tls.key": cert.private_key_pem.bytes(),
        "ca.crt": ca.cert_pem.bytes(),
    }


def project(data: dict[str, bytes], secret: dict[str, Any], directory: Path) -> list[str]:
    """Write what the kubelet would put at the mount of this ``secret`` volume: every key,
    or only its ``items``. Returns the file names."""
    directory.mkdir()
    items = secret.get("items") or [{"key": k, "path": k} for k in data]
    for item in items:
        (directory / item["path"]).write_bytes(data[item["key"]])
    return sorted(i["path"] for i in items)


def parse_as_the_pod(
    configure_parser: Callable[[argparse.ArgumentParser], argparse.ArgumentParser],
    r: Rendering,
    container: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
) -> argparse.Namespace:
    """The container's args, parsed by the real parser under the container's environment
    (the ConfigMap's, then its own: the parser reads them as it is built)."""
    with monkeypatch.context() as env:
        for key, value in r.one("ConfigMap")["data"].items():
            env.setenv(key, value)
        for entry in container.get("env", []):
            env.setenv(entry["name"], entry["value"])
        parser = configure_parser(argparse.ArgumentParser())
    return parser.parse_args(container["args"])


@pytest.mark.usefixtures("no_fastworker_env")
def test_the_control_plane_and_subworker_parsers_read_the_rendered_tls_settings_into_configs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mount = tmp_path / "tls"
    r = with_tls(tls={"mountPath": str(mount)})
    data = secret_data(SERVICE_HOST)
    found = pods(r)

    # The control plane: its certificate and key, and no CA (so no client certificates).
    spec, container = found[CONTROL_PLANE]
    assert project(data, tls_volume(spec, container, str(mount)), mount) == sorted(data)
    args = parse_as_the_pod(control_plane_parser, r, container, monkeypatch)
    tls = tls_from(args)
    assert tls == TLS(cert_file=str(mount / "tls.crt"), key_file=str(mount / "tls.key"))
    assert isinstance(tls.listening(), pynng.TLSConfig)  # the files read as a server config

    # A subworker: only ca.crt in its mount, and that is all it needs to dial over TLS.
    shutil.rmtree(mount)
    spec, container = found[SUBWORKER]
    assert project(data, tls_volume(spec, container, str(mount)), mount) == ["ca.crt"]
    args = parse_as_the_pod(subworker_parser, r, container, monkeypatch)
    assert args.discovery_address == f"tls+tcp://{SERVICE_HOST}:5550"
    tls = tls_from(args)
    assert tls == TLS(ca_file=str(mount / "ca.crt"))
    assert isinstance(dial_config(args.discovery_address, tls), pynng.TLSConfig)


def test_the_test_pod_submits_over_tls_with_the_ca(
    renderings: dict[str, Rendering], fake_fastworker: Path, tmp_path: Path
) -> None:
    record = tmp_path / "argv.json"
    ran = run_test_pod(helm_test_pod(renderings["tls"]), fake_fastworker, record, reply=None)
    assert ran.returncode == 0, ran.stderr
    got = json.loads(record.read_text())
    assert got["address"] == f"tls+tcp://{SERVICE_HOST}:5555"
    assert got["tls_ca"] == f"{MOUNT}/ca.crt"
    assert got["tls_server_name"] is None  # the certificate names the host it dials


# --- NOTES.txt ----------------------------------------------------------------------------------


def test_the_notes_give_tls_addresses_and_how_to_submit_with_the_ca(
    renderings: dict[str, Rendering],
) -> None:
    notes = renderings["tls"].notes
    assert f"  discovery  tls+tcp://{SERVICE_HOST}:5550\n" in notes
    assert f"  submit     tls+tcp://{SERVICE_HOST}:5555..5558\n" in notes
    assert f"kubectl get secret {SECRET} --namespace {NAMESPACE}" in notes
    # Through a port-forward the host dialed is 127.0.0.1: the Service's name is checked.
    submit = "fastworker submit --address tls+tcp://127.0.0.1:5555 --tls-ca ca.crt"
    assert f"{submit} --tls-server-name {SERVICE_HOST} " in notes
    assert "--address tcp://" not in notes


# --- no Secret, bad values -----------------------------------------------------------------------


def test_tls_without_a_secret_is_refused_by_the_schema() -> None:
    with pytest.raises(HelmValuesError, match=re.escape("at '/tls/existingSecret': minLength")):
        render({"tls": {"enabled": True}})


def test_tls_without_a_secret_fails_the_templates_too_when_the_schema_is_skipped(
    tmp_path: Path,
) -> None:
    # As `helm install --skip-schema-validation` would: the same chart without its schema.
    chart = shutil.copytree(
        CHART_DIR, tmp_path / "fastworker", ignore=shutil.ignore_patterns("values.schema.json")
    )
    message = "tls.enabled needs tls.existingSecret: the name of a Secret holding tls.crt, "
    with pytest.raises(HelmRenderError, match=re.escape(message)):
        helm_python.Chart.load(chart).render(
            {"tls": {"enabled": True}}, name=RELEASE, namespace=NAMESPACE
        )
    # And the copy renders with one (so the failure above is the missing Secret's).
    rendered = helm_python.Chart.load(chart).render(
        {"tls": {"enabled": True, "existingSecret": SECRET}}, name=RELEASE, namespace=NAMESPACE
    )
    assert "tls+tcp://" in rendered["fastworker/templates/subworker-deployment.yaml"]


PATH = "at '/tls"
BAD_TLS = [
    pytest.param({"enabeld": True}, f"{PATH}'", "'enabeld' not allowed", id="misspelled-key"),
    pytest.param({"secretName": "x"}, f"{PATH}'", "'secretName' not allowed", id="unknown-key"),
    pytest.param({"enabled": "yes"}, f"{PATH}/enabled'", "want boolean", id="enabled-a-string"),
    pytest.param(
        {"enabled": True, "existingSecret": ""},
        f"{PATH}/existingSecret'",
        "minLength",
        id="enabled-with-an-empty-secret",
    ),
    pytest.param(
        {"existingSecret": "My_Secret"},
        f"{PATH}/existingSecret'",
        "does not match pattern",
        id="secret-not-a-dns-name",
    ),
    pytest.param(
        {"mountPath": "etc/tls"}, f"{PATH}/mountPath'", "does not match pattern", id="relative"
    ),
    pytest.param({"mountPath": "/"}, f"{PATH}/mountPath'", "does not match pattern", id="root"),
    pytest.param({"mountPath": 5}, f"{PATH}/mountPath'", "want string", id="path-a-number"),
]


@pytest.mark.parametrize(("values", "path", "problem"), BAD_TLS)
def test_the_schema_rejects_bad_tls_values_naming_the_path(
    values: dict[str, Any], path: str, problem: str
) -> None:
    bad = {"tls": values}
    with pytest.raises(HelmValuesError) as caught:
        helm_python.Chart.load(CHART_DIR).validate_schema(copy.deepcopy(bad))
    assert path in str(caught.value)
    assert problem in str(caught.value)
    with pytest.raises(HelmValuesError, match=re.escape(path)):
        render(bad)


# --- the README -----------------------------------------------------------------------------------


def test_the_readme_documents_every_tls_key_and_what_the_certificate_must_name() -> None:
    readme = (CHART_DIR / "README.md").read_text()
    section = readme.split("\n## TLS\n", 1)[1].split("\n## ", 1)[0]
    for key in merged({})["tls"]:
        assert f"| `tls.{key}` |" in readme, key
    assert "`<release>-fastworker-control-plane.<namespace>.svc`" in section
    assert "kubectl create secret generic" in section
    for key in ("tls.crt", "tls.key", "ca.crt"):
        assert f"--from-file={key}=" in section, key
    assert "restart" in section.lower()
    assert "Mutual TLS is not supported by the chart yet" in section


def test_the_readme_certificate_names_what_the_rendered_pods_dial() -> None:
    """The cert-manager example, for release fw in namespace jobs, covers the host the
    subworkers dial, in the namespace it says, and feeds the Secret the helm command names."""
    readme = (CHART_DIR / "README.md").read_text()
    blocks = re.findall(r"```yaml\n(.*?)```", readme, re.S)
    [certificate] = [yaml.safe_load(b) for b in blocks if "kind: Certificate" in b]
    assert certificate["apiVersion"] == "cert-manager.io/v1"
    assert certificate["metadata"]["namespace"] == NAMESPACE
    assert SERVICE_HOST in certificate["spec"]["dnsNames"]
    secret = certificate["spec"]["secretName"]
    assert f"--set tls.existingSecret={secret}" in readme
    assert f"kubectl create secret generic {secret} " in readme
