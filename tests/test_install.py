"""mcp-hub as a user installs it: the sdist and the wheel that `python -m build` makes (the wheel built from the
sdist, and one straight from the source tree, as `pipx install .` and `uv tool install .` build it), installed
into a fresh virtualenv with its dependencies, and the installed `mcp-hub` run from a folder outside the
checkout, without this checkout on the path: `--version`, `init`, `check --connect`, and the SDK's client over
stdio, as Claude Desktop starts the hub. Built and installed once for the module.

What pip installs (the wheel's dependencies, and the build's own `setuptools`) comes from `tests/.wheels`, a folder
of the wheels pip downloaded for an earlier run: pip resolves the same requirements against it as against the
package index, without reading the index's pages (most of the ~20 s of CPU an install took), and downloads into
it what it lacks, the first time or when the requirements change."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from pathlib import Path

import pytest
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters, get_default_environment

from tests.conftest import ROOT

pytestmark = pytest.mark.slow

VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]
UNTRACKED = (".git", ".venv*", "node_modules", "build", "dist", "*.egg-info", "__pycache__", ".*_cache", ".hypothesis")
"""What .gitignore keeps out of a clone, and git's own folder."""
POLICIES = {path.name: path.read_text(encoding="utf-8") for path in (ROOT / "policies").glob("*.toml")}
WHEELS = ROOT / "tests" / ".wheels"
BUILD_REQUIRES = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["build-system"]["requires"]


def run(*command: str | Path, **options: object) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [str(part) for part in command],
        capture_output=True,
        text=True,
        timeout=600,
        **options,  # type: ignore[call-overload]
    )
    assert result.returncode == 0, f"{command}: {result.stdout}\n{result.stderr}"
    return result


def from_wheels() -> dict[str, str]:
    """The environment of a command whose pip installs only from `tests/.wheels`."""
    return {**os.environ, "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(WHEELS), "PIP_DISABLE_PIP_VERSION_CHECK": "1"}


def fill_wheels(*requirements: str | Path) -> None:
    """Download into `tests/.wheels` what installing `requirements` needs and it does not hold yet (pip resolves
    against the index; files already there are not fetched again)."""
    WHEELS.mkdir(exist_ok=True)
    run(sys.executable, "-m", "pip", "download", "--quiet", "--dest", WHEELS, *requirements)
    for own in WHEELS.glob("mcp_hub-*"):  # the wheel under test is installed from where it was built, never kept
        own.unlink()


def install(python: Path, *requirements: str | Path) -> None:
    """pip (this Python's) installs `requirements` and their dependencies into the environment of `python`, from
    `tests/.wheels`, first filling it when it lacks something they need; without compiling what it installs."""
    command = [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-compile"]
    tried = subprocess.run([*command, *map(str, requirements)], capture_output=True, text=True, env=from_wheels())
    if tried.returncode != 0:  # the first run, or requirements that changed: fetch what is missing, then again
        fill_wheels(*requirements)
        run(*command, *requirements, env=from_wheels())


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sdist and the wheel built from it (what `python -m build` makes), and in `tree/` the wheel built
    straight from the source tree; from a copy of the checkout as a clone has it (the link
    mcp_hub/defaults/policies -> ../../policies kept), so that no build output is left in, or read from, the
    checkout's own build/ and *.egg-info/."""
    source = tmp_path_factory.mktemp("source") / "mcp-hub"
    shutil.copytree(ROOT, source, symlinks=True, ignore=shutil.ignore_patterns(*UNTRACKED))
    out = tmp_path_factory.mktemp("dist")
    if not list(WHEELS.glob("setuptools-*.whl")):
        fill_wheels(*BUILD_REQUIRES)
    # Each build still makes an isolated environment and installs the build's requirements into it, from the wheels.
    run(sys.executable, "-m", "build", "--outdir", out, source, env=from_wheels())
    run(sys.executable, "-m", "build", "--wheel", "--outdir", out / "tree", source, env=from_wheels())
    return out


@pytest.fixture(scope="module")
def installed(dist: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The scripts folder of a fresh virtualenv into which the wheel (built from the sdist) was installed with its
    dependencies (resolved by pip from the wheel's metadata), as `uv tool install` makes one: without pip."""
    venv = tmp_path_factory.mktemp("tool") / "venv"
    run(sys.executable, "-m", "venv", "--without-pip", venv)
    scripts = venv / ("Scripts" if os.name == "nt" else "bin")
    (wheel,) = dist.glob("*.whl")
    install(scripts / "python", wheel)
    return scripts


def tool_environment(home: Path) -> dict[str, str]:
    """What a desktop client gives the hub it starts: no virtualenv on PATH, no PYTHONPATH; the user's home
    (whose .config is the config folder) and this session's state folder."""
    return {
        **get_default_environment(),
        "PATH": os.defpath,
        "HOME": str(home),
        "XDG_STATE_HOME": os.environ["XDG_STATE_HOME"],
    }


def test_the_sdist_and_the_wheels_hold_the_policies_the_scripts_and_the_license(dist: Path) -> None:
    (sdist,) = dist.glob("*.tar.gz")
    assert sdist.name == f"mcp_hub-{VERSION}.tar.gz"
    top = f"mcp_hub-{VERSION}"
    with tarfile.open(sdist) as archive:
        members = {member.name: member for member in archive.getmembers()}
        for name, text in POLICIES.items():
            member = members[f"{top}/mcp_hub/defaults/policies/{name}"]
            assert member.isfile()  # the file, not the source tree's link to ../../policies
            extracted = archive.extractfile(member)
            assert extracted is not None and extracted.read().decode("utf-8") == text
        assert {f"{top}/LICENSE", f"{top}/CHANGELOG.md", f"{top}/README.md", f"{top}/hub.toml"} <= set(members)
        assert not [name for name in members if name.startswith(f"{top}/tests/")]

    for wheel in (*dist.glob("*.whl"), *(dist / "tree").glob("*.whl")):
        assert wheel.name == f"mcp_hub-{VERSION}-py3-none-any.whl"
        with zipfile.ZipFile(wheel) as archive:
            names = set(archive.namelist())
            for name, text in POLICIES.items():
                assert archive.read(f"mcp_hub/defaults/policies/{name}").decode("utf-8") == text, wheel
            info = f"mcp_hub-{VERSION}.dist-info"
            assert f"{info}/licenses/LICENSE" in names
            scripts = archive.read(f"{info}/entry_points.txt").decode("utf-8")
            assert "mcp-hub = mcp_hub.entry:main" in scripts
            assert "mcp-hub-example-notes = mcp_hub.examples.notes:main" in scripts
            assert "mcp-hub-skills = mcp_hub.skills_server:main" in scripts
            assert not [name for name in names if name.startswith("tests/")]


def test_the_installed_hub_starts_a_config_with_init_and_connects_from_any_folder(
    installed: Path, tmp_path: Path
) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    environment = tool_environment(home)
    hub = installed / "mcp-hub"

    assert run(hub, "--version", cwd=work, env=environment).stdout == f"mcp-hub {VERSION}\n"
    where = run(installed / "python", "-c", "import mcp_hub; print(mcp_hub.__file__)", cwd=work, env=environment)
    assert Path(where.stdout.strip()).is_relative_to(installed.parent)  # the installed copy, not this checkout

    started = run(hub, "init", cwd=work, env=environment).stdout
    config = home / ".config" / "mcp-hub" / "hub.toml"
    assert f"wrote {config} (servers: notes)" in started  # mcp-server-time: only with the [examples] extra
    assert "# [servers.time]" in config.read_text(encoding="utf-8")
    entry = json.JSONDecoder().raw_decode(started[started.index("{", started.index("Claude Desktop")) :])[0]
    assert entry["mcpServers"]["hub"] == {"command": str(hub), "args": ["serve", "--config", str(config)]}

    checked = run(hub, "check", "--connect", "--config", config, cwd=work, env=environment)
    assert "notes: up" in checked.stdout and "policies: ok" in checked.stdout


@pytest.mark.anyio
async def test_a_client_over_stdio_lists_and_calls_the_installed_example_server(
    installed: Path, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    environment = tool_environment(home)
    run(installed / "mcp-hub", "init", "--dir", tmp_path / "hub", cwd=tmp_path, env=environment)
    params = StdioServerParameters(
        command=str(installed / "mcp-hub"),
        args=["serve", "--config", str(tmp_path / "hub" / "hub.toml")],
        cwd="/",  # where Claude Desktop may start it: nothing is read from the working folder
        env=environment,
    )
    async with Client(params, mode="legacy", cache=None) as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert {"notes_add_note", "notes_list_notes"} <= names, names
        added = await client.call_tool("notes_add_note", {"title": "installed", "text": "from the wheel"})
        assert not added.is_error, added
