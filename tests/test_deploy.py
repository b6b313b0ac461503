"""The deployment files in deploy/: the container image, the compose file and the Kubernetes manifests.

What runs everywhere: the Containerfile's and the compose file's references resolve; deploy/hub.toml and the
hub.toml of the Kubernetes ConfigMap load and pass `mcp-hub check`; the manifests (with `kubectl kustomize`
where kubectl is installed, else assembled from the kustomization here) validate against the Kubernetes
schemas (PyPI's kubernetes-validate) and hang together (selectors, probes, the ConfigMap's keys, the Secret).

The image build (`container_build`, slow and needing podman) runs only when asked:

    MCP_HUB_CONTAINER_BUILD=1 .venv/bin/python -m pytest tests/test_deploy.py -m container_build

with MCP_HUB_CONTAINER_BASE naming the base image (default python:3.11-slim; a local one where no registry
is reachable) and MCP_HUB_PODMAN the podman command line (default "podman"; e.g. "podman --runtime runc
--cgroup-manager cgroupfs").
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import shlex
import shutil
import subprocess
import time
import tomllib
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from mcp_hub.config import load_config, unauthenticated_exposure
from tests.conftest import hub_command

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"
KUBERNETES = DEPLOY / "kubernetes"
CONTAINERFILE = DEPLOY / "Containerfile"

ENVIRON = {
    "HUB_API_KEY": "test-key-0123456789abcdef",
    "HUB_CLUSTER_SECRET": "test-cluster-secret-0123456789",
    "HUB_ADVERTISE": "http://hub-1:8765/mcp",
    "REDIS_PASSWORD": "test-redis-password-0123456789",
}
"""The variables the shipped configurations reference, as compose's env file and the Kubernetes Secret set them."""

SCHEMA_VERSIONS = ("1.30.0", kubernetes_validate.latest_version())
"""The Kubernetes versions the manifests are validated against: an older one still served, and the newest known."""


# -- the container image ----------------------------------------------------------------------------------------


def containerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of the Containerfile, continuation lines joined, comments left out."""
    lines: list[tuple[str, str]] = []
    pending = ""
    for raw in CONTAINERFILE.read_text().splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        whole = (pending + line).strip()
        pending = ""
        instruction, _, rest = whole.partition(" ")
        lines.append((instruction.upper(), rest.strip()))
    assert not pending, "the Containerfile ends in a continuation line"
    return lines


def dockerignore_keeps(path: str) -> bool:
    """Whether the build context (.dockerignore at the top) keeps `path`, a path relative to the checkout."""
    kept = True
    for raw in (ROOT / ".dockerignore").read_text().splitlines():
        rule = raw.strip()
        if not rule or rule.startswith("#"):
            continue
        negated = rule.startswith("!")
        pattern = rule.lstrip("!").rstrip("/")
        parts = Path(path).parts
        # a rule matches the path or any folder above it
        if any(fnmatch.fnmatch("/".join(parts[: i + 1]), pattern) for i in range(len(parts))) or (
            pattern.startswith("**/") and any(fnmatch.fnmatch(part, pattern[3:]) for part in parts)
        ):
            kept = negated
    return kept


def test_containerfile_copies_what_exists_and_serves_as_documented() -> None:
    instructions = containerfile_instructions()
    stages = [args.split() for name, args in instructions if name == "FROM"]
    names = [words[-1] for words in stages if len(words) == 3 and words[1].upper() == "AS"]
    assert {"builder", "hub", "tools"} <= set(names)
    assert stages[-1] == ["hub"], "the default (last) target is the hub alone"
    assert instructions[0] == ("ARG", "BASE=python:3.11-slim"), "the base is a build argument"
    assert all(words[0] in ("${BASE}", *names) for words in stages)

    for name, args in instructions:
        if name == "COPY" and "--from=" not in args:
            *sources, _target = args.split()
            for source in sources:
                assert (ROOT / source).exists(), f"COPY {source}: not in the source tree"
                assert dockerignore_keeps(source.rstrip("/")), f"COPY {source}: left out by .dockerignore"
        if name == "RUN":
            for mounted in re.findall(r"--mount=\S*from=(\w+)", args):
                assert mounted in names
    # what the wheel is built from: the package, the shipped policies (mcp_hub/defaults/policies links there)
    for kept in ("pyproject.toml", "README.md", "mcp_hub/cli.py", "policies/profiles.toml"):
        assert dockerignore_keeps(kept), kept
    for left_out in (".venv/bin/python", "tests/npm/node_modules/x", ".git/HEAD", "mcp_hub/__pycache__/x.pyc"):
        assert not dockerignore_keeps(left_out), left_out

    values = {name: args for name, args in instructions}  # the last of each
    assert values["EXPOSE"] == "8765"
    assert values["USER"].split(":")[0] not in ("0", "root")
    assert "/healthz" in values["HEALTHCHECK"] and "urllib.request" in values["HEALTHCHECK"]
    command = json.loads(values["ENTRYPOINT"]) + json.loads(values["CMD"])
    assert command == [
        "mcp-hub", "serve", "--config", "/etc/mcp-hub/hub.toml", "--transport", "http", "--host", "0.0.0.0"
    ]  # fmt: skip
    assert "XDG_STATE_HOME=/var/lib" in " ".join(args for name, args in instructions if name == "ENV")
    assert "/var/lib/mcp-hub" in values["VOLUME"]
    tools = " ".join(args for name, args in instructions if name == "RUN")
    assert "nodejs" in tools and "npm" in tools and "uv" in tools


# -- the configurations ---------------------------------------------------------------------------------------------


def check(config: Path, state: Path) -> subprocess.CompletedProcess[str]:
    """`mcp-hub check` on `config`, with the variables it references set and `state` as the state folder."""
    return subprocess.run(
        hub_command("check", "--config", str(config)),
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **ENVIRON, "XDG_STATE_HOME": str(state)},
    )


def assert_serves_others(config: Path, state: Path) -> None:
    hub = load_config(config, environ=ENVIRON)
    assert hub.http.host == "0.0.0.0"
    assert hub.auth.api_keys == {"agent": ENVIRON["HUB_API_KEY"]}
    assert unauthenticated_exposure(hub, "0.0.0.0") is None, "bound to 0.0.0.0, clients must present a key"
    assert hub.cluster.redis == f"redis://:{ENVIRON['REDIS_PASSWORD']}@redis:6379/0"
    assert hub.cluster.advertise == ENVIRON["HUB_ADVERTISE"]
    assert hub.cluster.secret == ENVIRON["HUB_CLUSTER_SECRET"]
    done = check(config, state)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "ok, revision" in done.stdout and "warning" not in done.stderr, done.stdout + done.stderr
    principals = tomllib.loads((config.parent / "policies" / "principals.toml").read_text())["principals"]
    assert set(hub.auth.api_keys) <= set(principals), "every key's principal has a profile"


def test_deploy_hub_toml_loads_and_passes_check(tmp_path: Path) -> None:
    assert_serves_others(DEPLOY / "hub.toml", tmp_path)


def test_deploy_hub_toml_without_its_variables_is_refused(tmp_path: Path) -> None:
    done = subprocess.run(
        hub_command("check", "--config", str(DEPLOY / "hub.toml")),
        capture_output=True,
        text=True,
        timeout=120,
        env={
            **{key: value for key, value in os.environ.items() if key not in ENVIRON},
            "XDG_STATE_HOME": str(tmp_path),
        },
    )
    assert done.returncode == 2
    assert "HUB_API_KEY" in done.stderr


def test_kubernetes_copies_match_deploy() -> None:
    """The kustomization may only read files below it: its hub.toml and policies are copies kept equal."""
    assert (KUBERNETES / "hub.toml").read_text() == (DEPLOY / "hub.toml").read_text()
    ours = sorted(path.name for path in (DEPLOY / "policies").glob("*.toml"))
    assert ours == sorted(path.name for path in (KUBERNETES / "policies").glob("*.toml"))
    for name in ours:
        assert (KUBERNETES / "policies" / name).read_text() == (DEPLOY / "policies" / name).read_text(), name


# -- Kubernetes -----------------------------------------------------------------------------------------------------


def assembled() -> list[dict[str, Any]]:
    """The base's documents as kustomize renders them, for this base's features: its resources, the generated
    ConfigMap, the common labels and the image override."""
    kustomization = yaml.safe_load((KUBERNETES / "kustomization.yaml").read_text())
    assert set(kustomization) <= {
        "apiVersion", "kind", "labels", "resources", "configMapGenerator", "generatorOptions", "images"
    }, "a feature assembled() does not render; render with kubectl"  # fmt: skip
    documents: list[dict[str, Any]] = []
    for generator in kustomization["configMapGenerator"]:
        data = {}
        for entry in generator["files"]:
            key, _, file = entry.rpartition("=") if "=" in entry else (Path(entry).name, "", entry)
            data[key] = (KUBERNETES / file).read_text()
        documents.append(
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": generator["name"]}, "data": data}
        )
    for resource in kustomization["resources"]:
        documents += [d for d in yaml.safe_load_all((KUBERNETES / resource).read_text()) if d]
    labels = {k: v for entry in kustomization.get("labels", []) for k, v in entry["pairs"].items()}
    images = {image["name"]: f"{image['newName']}:{image['newTag']}" for image in kustomization.get("images", [])}
    for document in documents:
        document["metadata"].setdefault("labels", {}).update(labels)
        for container in document.get("spec", {}).get("template", {}).get("spec", {}).get("containers", []):
            container["image"] = images.get(container["image"], container["image"])
    return documents


def rendered() -> list[dict[str, Any]]:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not installed: `kubectl kustomize deploy/kubernetes` is not run")
    done = subprocess.run([kubectl, "kustomize", str(KUBERNETES)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return [document for document in yaml.safe_load_all(done.stdout) if document]


@pytest.fixture(scope="module", params=["assembled", "kubectl kustomize"])
def manifests(request: pytest.FixtureRequest) -> list[dict[str, Any]]:
    return assembled() if request.param == "assembled" else rendered()


def test_kubectl_kustomize_renders_what_the_test_assembles() -> None:
    def key(document: dict[str, Any]) -> tuple[str, str]:
        return document["kind"], document["metadata"]["name"]

    assert sorted(rendered(), key=key) == sorted(assembled(), key=key)


def test_manifests_validate_against_the_kubernetes_schemas(manifests: list[dict[str, Any]]) -> None:
    for document in manifests:
        for version in SCHEMA_VERSIONS:
            kubernetes_validate.validate(document, version, strict=True)
    kinds = sorted((d["kind"], d["metadata"]["name"]) for d in manifests)
    assert kinds == [
        ("ConfigMap", "mcp-hub-config"),
        ("Deployment", "mcp-hub"),
        ("Deployment", "redis"),
        ("PodDisruptionBudget", "mcp-hub"),
        ("Service", "mcp-hub"),
        ("Service", "redis"),
    ]


def find(manifests: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    return next(d for d in manifests if d["kind"] == kind and d["metadata"]["name"] == name)


def selects(selector: dict[str, str], deployment: dict[str, Any]) -> bool:
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    return all(labels.get(key) == value for key, value in selector.items())


def test_the_hub_deployment_is_run_as_documented(manifests: list[dict[str, Any]]) -> None:
    hub = find(manifests, "Deployment", "mcp-hub")
    assert hub["spec"]["replicas"] == 2
    pod = hub["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["image"] == "registry.example.com/mcp-hub:0.1.0"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert {"requests", "limits"} <= set(container["resources"])
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] != 0
    security = container["securityContext"]
    assert security["readOnlyRootFilesystem"] is True and security["allowPrivilegeEscalation"] is False
    assert security["capabilities"]["drop"] == ["ALL"]
    assert container["args"][-2:] == ["--host", "0.0.0.0"]

    # the Secret's keys, and this replica's address for the others (from its pod IP)
    env = {item["name"]: item for item in container["env"]}
    for name in ("HUB_API_KEY", "HUB_CLUSTER_SECRET", "REDIS_PASSWORD"):
        assert env[name]["valueFrom"]["secretKeyRef"] == {"name": "mcp-hub-secrets", "key": name}
    assert env["POD_IP"]["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"
    assert env["HUB_ADVERTISE"]["value"] == "http://$(POD_IP):8765/mcp"
    assert list(env).index("POD_IP") < list(env).index("HUB_ADVERTISE"), "$(POD_IP) is expanded only if defined first"

    # every writable path is a volume; the config is a directory (no subPath: the kubelet's swap is seen)
    mounts = {mount["mountPath"]: mount for mount in container["volumeMounts"]}
    assert mounts["/etc/mcp-hub"]["readOnly"] is True
    assert not any("subPath" in mount for mount in mounts.values())
    assert {"/var/lib/mcp-hub", "/tmp", "/home/mcp-hub"} <= set(mounts)

    # the ConfigMap's every key is in the folder: hub.toml, and the policies below policies/
    volumes = {volume["name"]: volume for volume in pod["volumes"]}
    projected = volumes[mounts["/etc/mcp-hub"]["name"]]["configMap"]
    config_map = find(manifests, "ConfigMap", projected["name"])
    items = {item["key"]: item["path"] for item in projected["items"]}
    assert set(items) == set(config_map["data"])
    assert items["hub.toml"] == "hub.toml"
    assert all(path.startswith("policies/") for key, path in items.items() if key != "hub.toml")

    service = find(manifests, "Service", "mcp-hub")
    assert selects(service["spec"]["selector"], hub)
    assert service["spec"]["ports"][0]["port"] == 8765
    budget = find(manifests, "PodDisruptionBudget", "mcp-hub")
    assert selects(budget["spec"]["selector"]["matchLabels"], hub)
    assert budget["spec"]["minAvailable"] == 1

    redis = find(manifests, "Deployment", "redis")
    assert selects(find(manifests, "Service", "redis")["spec"]["selector"], redis)
    (server,) = redis["spec"]["template"]["spec"]["containers"]
    assert server["args"][-2:] == ["--requirepass", "$(REDIS_PASSWORD)"]
    assert server["env"][0]["valueFrom"]["secretKeyRef"] == {"name": "mcp-hub-secrets", "key": "REDIS_PASSWORD"}


def test_the_config_maps_hub_toml_loads_and_passes_check(manifests: list[dict[str, Any]], tmp_path: Path) -> None:
    """The folder the pods see, laid out from the ConfigMap as the Deployment projects it."""
    pod = find(manifests, "Deployment", "mcp-hub")["spec"]["template"]["spec"]
    projected = next(v["configMap"] for v in pod["volumes"] if "configMap" in v)
    data = find(manifests, "ConfigMap", projected["name"])["data"]
    for item in projected["items"]:
        (tmp_path / "config" / item["path"]).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "config" / item["path"]).write_text(data[item["key"]])
    assert_serves_others(tmp_path / "config" / "hub.toml", tmp_path / "state")


# -- compose --------------------------------------------------------------------------------------------------------


def test_compose_runs_two_replicas_sharing_redis() -> None:
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    services = compose["services"]
    hubs = {name: service for name, service in services.items() if name.startswith("hub-")}
    assert len(hubs) == 2 and "redis" in services
    declared = set(compose["volumes"])
    advertised = set()
    for name, service in hubs.items():
        build = service["build"]
        assert (DEPLOY / build["context"] / build["dockerfile"]).resolve() == CONTAINERFILE
        for env_file in service["env_file"]:
            assert (DEPLOY / f"{env_file}.example").exists(), f"{name}: {env_file} has no example beside it"
        assert service["depends_on"]["redis"]["condition"] == "service_healthy"
        mounts = {}
        for volume in service["volumes"]:
            source, target, *mode = volume.split(":")
            mounts[target] = source
            if source.startswith("."):
                assert (DEPLOY / source).exists(), f"{name}: {source} does not exist"
                assert mode == ["ro"], f"{name}: the configuration is mounted read-only"
            else:
                assert source in declared, f"{name}: volume {source} is not declared"
        assert mounts["/etc/mcp-hub/hub.toml"] == "./hub.toml"
        assert mounts["/etc/mcp-hub/policies"] == "./policies"
        assert mounts["/var/lib/mcp-hub-tokens"] == "tokens", "the token store is shared"
        advertised.add(service["environment"]["HUB_ADVERTISE"])
        assert service["environment"]["HUB_ADVERTISE"] == f"http://{name}:8765/mcp"
    assert len({hub["volumes"][2] for hub in hubs.values()}) == 2, "each replica has its state of its own"
    assert len(advertised) == 2
    assert services["redis"]["env_file"] == ["mcp-hub.env"], "Redis's password comes from the env file too"
    # the variables hub.toml reads come from the env file or the service
    example = (DEPLOY / "mcp-hub.env.example").read_text()
    settings = "\n".join(line for line in (DEPLOY / "hub.toml").read_text().splitlines() if not line.startswith("#"))
    for variable in re.findall(r"\$\{(\w+)", settings):
        assert f"\n{variable}=" in example or variable == "HUB_ADVERTISE", variable
    assert "mcp-hub.env" in (ROOT / ".gitignore").read_text().replace("deploy/", "")


# -- building and running the image (opt-in) ---------------------------------------------------------------------


def podman_build(*options: str) -> tuple[list[str], str]:
    """The podman command line, and the image built from deploy/Containerfile with `options`; skips unless asked."""
    if os.environ.get("MCP_HUB_CONTAINER_BUILD") != "1":
        pytest.skip("builds the image (minutes): set MCP_HUB_CONTAINER_BUILD=1 to run it")
    podman = shlex.split(os.environ.get("MCP_HUB_PODMAN", "podman"))
    if shutil.which(podman[0]) is None:
        pytest.skip(f"{podman[0]} is not installed")
    base = os.environ.get("MCP_HUB_CONTAINER_BASE", "python:3.11-slim")
    image = f"localhost/mcp-hub-test:{'-'.join(option.lstrip('-') for option in options) or 'latest'}"
    build = [*podman, "build", "--format", "docker", "--build-arg", f"BASE={base}", "-f", str(CONTAINERFILE)]
    done = subprocess.run([*build, *options, "-t", image, str(ROOT)], capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    return podman, image


@pytest.mark.container_build
def test_the_tools_image_runs_npx_and_uvx_as_its_user() -> None:
    podman, image = podman_build("--target", "tools")
    script = "id -u && node --version && npx --version && uvx --version && mcp-hub --version"
    done = subprocess.run(
        [*podman, "run", "--rm", "--entrypoint", "sh", image, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[0] == "10001"
    assert "mcp-hub" in done.stdout.splitlines()[-1]


@pytest.mark.container_build
def test_the_image_builds_and_serves(tmp_path: Path) -> None:
    podman, image = podman_build()

    # one container: deploy/hub.toml without [cluster], mounted read-only as the config folder
    config = tmp_path / "config"
    shutil.copytree(DEPLOY / "policies", config / "policies")
    text = (DEPLOY / "hub.toml").read_text()
    (config / "hub.toml").write_text(re.sub(r"(?ms)^\[cluster\].*?(?=^\[servers)", "", text))
    name = f"mcp-hub-test-{os.getpid()}"
    run = [*podman, "run", "-d", "--rm", "--name", name, "-p", "127.0.0.1::8765", "--read-only"]
    run += ["-v", f"{config}:/etc/mcp-hub:ro", "-e", f"HUB_API_KEY={ENVIRON['HUB_API_KEY']}", image]
    done = subprocess.run(run, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    try:
        port = subprocess.run([*podman, "port", name, "8765"], capture_output=True, text=True, timeout=60)
        url = f"http://{port.stdout.strip().splitlines()[0]}"
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{url}/readyz", timeout=5) as answer:
                    assert json.load(answer)["status"] == "ok"
                    break
            except (urllib.error.URLError, ConnectionError):
                if time.monotonic() > deadline:
                    logs = subprocess.run([*podman, "logs", name], capture_output=True, text=True, timeout=60)
                    raise AssertionError(logs.stdout + logs.stderr) from None
                time.sleep(0.5)
        # no key, no call
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(urllib.request.Request(f"{url}/mcp", data=b"{}", method="POST"), timeout=5)
        refused.value.close()
        assert refused.value.code == 401
        health = subprocess.run([*podman, "healthcheck", "run", name], capture_output=True, text=True, timeout=60)
        assert health.returncode == 0, health.stdout + health.stderr
        user = subprocess.run([*podman, "exec", name, "id", "-u"], capture_output=True, text=True, timeout=60)
        assert user.stdout.strip() == "10001"
    finally:
        subprocess.run([*podman, "rm", "-f", "-v", name], capture_output=True, timeout=120)
