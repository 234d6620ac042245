"""The chart README's own commands and values, rendered: the images it builds are the ones
the chart pulls, every `helm install`/`helm upgrade` in it renders, and its "Your tasks"
example gives a control plane that can import its task modules in FastWorker's own image
(the real parser and module loader, run on the rendered arguments and environment)."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from chart_render import (
    APP_VERSION,
    CHART_DIR,
    CONTROL_PLANE,
    NAMESPACE,
    POOL_LABEL,
    RELEASE,
    ROOT,
    SUBWORKER,
    Rendering,
    ValueSet,
    build,
    labels_of,
    merge,
)

README = (CHART_DIR / "README.md").read_text()
COMPONENT = "app.kubernetes.io/component"
CUSTOM_IMAGE = ROOT / "examples" / "custom-image"


def commands(text: str = README) -> list[list[str]]:
    """Every command of the README's bash blocks, continuation lines joined, as argv."""
    found = []
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        for line in re.sub(r"\\\n\s*", " ", block).splitlines():
            argv = shlex.split(line, comments=True)
            if argv:
                found.append(argv)
    return found


def yaml_block(marker: str) -> dict[str, Any]:
    [block] = [b for b in re.findall(r"```yaml\n(.*?)```", README, re.S) if marker in b]
    loaded: dict[str, Any] = yaml.safe_load(block)
    return loaded


# The values files the README's commands name, as the README says to save them.
FILES = {"shop-values.yaml": yaml_block("shop.tasks"), "pools-values.yaml": yaml_block("pools:")}


def set_path(values: dict[str, Any], path: str, value: Any) -> None:
    *parents, last = path.split(".")
    for key in parents:
        values = values.setdefault(key, {})
    values[last] = value


def scalar(text: str) -> Any:
    """What `helm --set` makes of a value: booleans and integers typed, the rest strings."""
    if text in ("true", "false"):
        return text == "true"
    return int(text) if re.fullmatch(r"-?[0-9]+", text) else text


def helm_values(argv: list[str]) -> dict[str, Any]:
    """The values a `helm install/upgrade` command passes: its -f files, then --set and
    --set-json in order (Helm's precedence)."""
    files: dict[str, Any] = {}
    sets: dict[str, Any] = {}
    args = iter(argv)
    for arg in args:
        if arg in ("-f", "--values"):
            files = merge(files, FILES[next(args)])
        elif arg == "--set":
            for item in next(args).split(","):
                key, value = item.split("=", 1)
                set_path(sets, key, scalar(value))
        elif arg == "--set-json":
            key, value = next(args).split("=", 1)
            set_path(sets, key, json.loads(value))
    return merge(files, sets)


def helm_installs() -> list[list[str]]:
    found = [
        c for c in commands() if c[0] == "helm" and c[1] in ("install", "upgrade") and len(c) > 3
    ]
    assert found
    for argv in found:
        chart = argv[3] if argv[1] == "install" or argv[2] != "--install" else argv[4]
        assert chart == "deploy/helm/fastworker", argv
        assert argv[argv.index("--namespace") + 1] == NAMESPACE, argv
        assert RELEASE in argv[2:5], argv
    return found


def docker_builds() -> dict[str, list[str]]:
    """Each `docker build` of the README by its -t tag."""
    return {c[c.index("-t") + 1]: c for c in commands() if c[:2] == ["docker", "build"]}


def pushed() -> set[str]:
    return {c[2] for c in commands() if c[:2] == ["docker", "push"]}


def render_command(argv: list[str], name: str) -> Rendering:
    return build(ValueSet(name, helm_values(argv), frozenset()))


def images(r: Rendering) -> set[str]:
    return {c["image"] for _, pod in r.pod_templates() for c in pod["spec"]["containers"]}


# --- image tags --------------------------------------------------------------------------------


def test_the_readme_builds_fastworkers_images_under_the_tag_the_chart_pulls_by_default() -> None:
    builds = docker_builds()
    by_target = {c[c.index("--target") + 1]: tag for tag, c in builds.items() if "--target" in c}
    assert set(by_target) == {"control-plane", "subworker"}
    for tag in by_target.values():
        assert tag.endswith(f":{APP_VERSION}"), tag
        assert tag in pushed(), f"{tag} is built but never pushed"
    assert f"`appVersion` (`{APP_VERSION}`" in README

    [install] = [c for c in helm_installs() if c[1] == "install" and "--create-namespace" in c]
    r = render_command(install, "readme-install")
    assert r.container(CONTROL_PLANE)["image"] == by_target["control-plane"]
    assert r.container(SUBWORKER)["image"] == by_target["subworker"]
    assert images(r) == set(by_target.values())  # the helm test pod's too


def test_the_readme_says_how_to_pull_another_tag() -> None:
    assert "--set image.tag=latest" in README
    r = build(ValueSet("latest", {"image": {"tag": "latest"}}, frozenset()))
    assert images(r) == {"fastworker-control-plane:latest", "fastworker-subworker:latest"}


@pytest.mark.parametrize("index", range(len(helm_installs())))
def test_every_helm_install_and_upgrade_in_the_readme_renders(index: int) -> None:
    argv = helm_installs()[index]
    r = render_command(argv, f"readme-{index}")
    assert [d for d in r.of_kind("Deployment") if labels_of(d)[COMPONENT] == SUBWORKER]


# --- the "Your tasks" example --------------------------------------------------------------------


@pytest.fixture(scope="module")
def shop() -> Rendering:
    [argv] = [c for c in helm_installs() if "shop-values.yaml" in c]
    return render_command(argv, "readme-shop")


def test_the_shop_image_is_built_from_the_subworker_image_the_readme_builds_and_pulled(
    shop: Rendering,
) -> None:
    builds = docker_builds()
    [(tag, argv)] = [(t, c) for t, c in builds.items() if c[-1] == "examples/custom-image"]
    base = argv[argv.index("--build-arg") + 1]
    assert base.startswith("FASTWORKER_IMAGE=")
    assert base.removeprefix("FASTWORKER_IMAGE=") in builds  # FastWorker's, at appVersion
    assert base.endswith(f"fastworker-subworker:{APP_VERSION}")
    assert tag in pushed()
    assert shop.container(SUBWORKER)["image"] == tag
    # The control plane keeps FastWorker's own image, the one the README builds.
    assert shop.container(CONTROL_PLANE)["image"] in builds
    assert shop.container(CONTROL_PLANE)["image"].endswith(
        f"fastworker-control-plane:{APP_VERSION}"
    )
    assert "ARG FASTWORKER_IMAGE" in (CUSTOM_IMAGE / "Dockerfile").read_text()


def pod_env(r: Rendering, component: str) -> dict[str, str]:
    """The container's environment as the kubelet makes it: the ConfigMap (envFrom), then
    its own env entries, which win."""
    container = r.container(component)
    env = {}
    if container.get("envFrom"):
        env.update(r.one("ConfigMap")["data"])
    env.update({e["name"]: e["value"] for e in container.get("env", []) if "value" in e})
    return env


LOAD = """
import argparse, importlib, json, sys
from fastworker_subworker import TaskModuleError, load_task_modules
module, argv, find_only = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3] == "1"
parser = importlib.import_module(module).configure_parser(argparse.ArgumentParser())
args = parser.parse_args(argv)
if find_only:  # where importing would need the image's third-party packages
    import importlib.util
    missing = [m for m in args.task_modules if importlib.util.find_spec(m) is None]
    print(json.dumps({"modules": args.task_modules, "missing": missing}))
    sys.exit(3 if missing else 0)
try:
    load_task_modules(args.task_modules)
except TaskModuleError as exc:
    print(exc)
    sys.exit(3)
print(json.dumps({"modules": args.task_modules}))
"""


def run_as_the_pod(
    parser_module: str,
    args: list[str],
    env: dict[str, str],
    cwd: Path,
    pythonpath: Path,
    find_only: bool = False,
) -> subprocess.CompletedProcess[str]:
    """The component's real parser on the rendered args under the rendered environment,
    then its module loader, in a fresh interpreter whose only extra path is ``pythonpath``
    (the image's /app/tasks) and working directory ``cwd`` (the image's /app)."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("FASTWORKER_")}
    clean.pop("PYTHONPATH", None)
    return subprocess.run(
        [sys.executable, "-c", LOAD, parser_module, json.dumps(args), "1" if find_only else "0"],
        env={**clean, **env, "PYTHONPATH": str(pythonpath)},
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_the_control_plane_of_the_example_imports_its_modules_in_fastworkers_own_image(
    shop: Rendering, tmp_path: Path
) -> None:
    """FastWorker's control-plane image has its packages and an empty /app/tasks: the
    rendered control plane must start there (the bug: it was given shop.tasks and exited
    with "cannot import task module 'shop.tasks'", a crash loop)."""
    tasks = tmp_path / "app-tasks"  # /app/tasks of the stock image: empty
    tasks.mkdir()
    container = shop.container(CONTROL_PLANE)
    env = pod_env(shop, CONTROL_PLANE)
    assert env["FASTWORKER_TASK_MODULES"] == "fastworker.diagnostics"
    assert "--local-concurrency=0" in container["args"]  # it only dispatches

    done = run_as_the_pod("fastworker_control_plane.cli", container["args"], env, tmp_path, tasks)
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout) == {"modules": ["fastworker.diagnostics"]}

    # What the chart rendered before: the subworkers' list (the ConfigMap's) in the control
    # plane too. The same check catches it.
    old_env = {
        **env,
        "FASTWORKER_TASK_MODULES": shop.one("ConfigMap")["data"]["FASTWORKER_TASK_MODULES"],
    }
    crashed = run_as_the_pod(
        "fastworker_control_plane.cli", container["args"], old_env, tmp_path, tasks
    )
    assert crashed.returncode == 3
    assert "cannot import task module 'shop.tasks'" in crashed.stdout


def test_the_subworkers_of_the_example_find_shop_tasks_where_the_shop_image_puts_it(
    shop: Rendering, tmp_path: Path
) -> None:
    dockerfile = (CUSTOM_IMAGE / "Dockerfile").read_text()
    assert re.search(r"^COPY shop /app/tasks/shop$", dockerfile, re.M)
    env = pod_env(shop, SUBWORKER)
    assert env["FASTWORKER_TASK_MODULES"].split() == ["fastworker.diagnostics", "shop.tasks"]

    container = shop.container(SUBWORKER)
    found = run_as_the_pod(
        "fastworker_subworker.cli", container["args"], env, tmp_path, CUSTOM_IMAGE, find_only=True
    )
    assert found.returncode == 0, found.stdout + found.stderr
    assert json.loads(found.stdout)["modules"] == ["fastworker.diagnostics", "shop.tasks"]


def test_a_control_plane_module_list_of_ones_own_reaches_only_the_control_plane() -> None:
    r = build(
        ValueSet(
            "cp-modules",
            {"controlPlane": {"taskModules": ["fastworker.diagnostics", "shop.tasks"]}},
            frozenset(),
        )
    )
    assert (
        pod_env(r, CONTROL_PLANE)["FASTWORKER_TASK_MODULES"] == "fastworker.diagnostics shop.tasks"
    )
    assert pod_env(r, SUBWORKER)["FASTWORKER_TASK_MODULES"] == "fastworker.diagnostics"


def test_the_top_level_readmes_kubernetes_section_builds_the_images_its_install_pulls() -> None:
    text = (ROOT / "README.md").read_text()
    section = text.split("\n## Kubernetes\n", 1)[1].split("\n## ", 1)[0]
    found = commands(section)
    builds = {c[c.index("-t") + 1] for c in found if c[:2] == ["docker", "build"]}
    pushes = {c[2] for c in found if c[:2] == ["docker", "push"]}
    [install] = [c for c in found if c[:2] == ["helm", "install"]]
    r = render_command(install, "top-readme-install")
    assert images(r) == builds == pushes
    assert all(tag.endswith(f":{APP_VERSION}") for tag in builds)


# --- the "Worker pools" example ------------------------------------------------------------------


def test_the_pools_example_renders_a_deployment_per_pool_and_the_query_the_readme_quotes() -> None:
    [argv] = [c for c in helm_installs() if "pools-values.yaml" in c]
    r = render_command(argv, "readme-pools")
    deployments = {
        labels_of(d)[POOL_LABEL]: d
        for d in r.of_kind("Deployment")
        if labels_of(d)[COMPONENT] == SUBWORKER
    }
    assert set(deployments) == {"default", "reports"}
    names = {d["metadata"]["name"] for d in deployments.values()}
    assert names == {f"{RELEASE}-fastworker-subworker-{pool}" for pool in deployments}
    # Each `kubectl scale` of the README names a Deployment the chart renders.
    scaled = {c[3] for c in commands() if c[:3] == ["kubectl", "scale", "deployment"]}
    assert scaled <= {f"{RELEASE}-fastworker-subworker", *names}
    assert scaled & names

    [container] = deployments["reports"]["spec"]["template"]["spec"]["containers"]
    assert "--queues=reports:1,exports.v2:3" in container["args"]
    assert container["image"] == "registry.example.com/fastworker/reports-subworker:2.0.1"
    env = {e["name"]: e.get("value") for e in container.get("env", [])}
    assert env["FASTWORKER_TASK_MODULES"] == "fastworker.diagnostics shop.reports"
    [scaled_object] = r.of_kind("ScaledObject")
    query = scaled_object["spec"]["triggers"][0]["metadata"]["query"]
    assert f"`{query}`" in README
    assert "Warning" not in r.notes  # the default pool serves the default queue
