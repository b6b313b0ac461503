"""Stdio servers in a sandbox: what a server may see, reach and use (Linux: bubblewrap, rlimits, cgroups).

A stdio server whose `sandbox` (config.py, `effective_sandbox`) names a profile other than "off" is started
through `confine()`, which returns the command line that starts it confined:

- bubblewrap (`bwrap`) gives it namespaces of its own: the system folders read-only (/usr, /etc without its
  secrets, ...), an empty private home at $HOME's path and an empty /tmp, its own /proc and /dev, no
  capabilities; what it may read is its own program (the command's installation: a virtual environment and
  the Python it was made from, a `node_modules` folder, a script given to an interpreter) and the `read`
  paths, what it may write the `write` paths. Folders that hold secrets (`~/.ssh`, `~/.aws`, the hub's own
  state folder, ...) stay hidden inside a bound folder unless a path names them. With `network = "none"` it
  has a network namespace of its own, with only its own loopback.
- `/bin/sh` first puts the process in a cgroup of its own (where one can be made: cgroup v1 `memory` and
  `pids` controllers writable by the hub, as for root in a container), with its memory and process limits,
  sets the rlimits (open files, file size, CPU time), then execs bubblewrap.

When the server's process ends, `Confinement.ended()` says which limit ended it, if one did ("the server was
killed for its memory limit (1 GiB)"), from the cgroup's counters and the signal; `release()` kills what is
left in its cgroup and removes it.

Where bubblewrap is missing or cannot make namespaces, a server whose own table asks for a sandbox does not
start (`SandboxUnavailable`, naming what to install); one that only has the hub-wide default runs unconfined,
and `describe()` says so (`check`, /healthz, the console, a warning in the log).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import itertools
import logging
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit
from urllib.request import url2pathname

import anyio

from mcp_hub.config import SandboxSettings, ServerConfig
from mcp_hub.state import state_folder
from mcp_hub.upstream.stderr import exit_status

logger = logging.getLogger("mcp_hub.upstream")

GIB = 1024**3

PROFILE_LIMITS: Mapping[str, Any] = {
    "memory": GIB,
    "processes": 256,
    "file_size": GIB,
    "open_files": 4096,
    "cpu_seconds": None,
}
"""The limits of the "standard" and "network" profiles, where the settings name none."""

PROFILE_NETWORK: Mapping[str, str] = {"standard": "none", "network": "any"}

SYSTEM_PATHS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt", "/nix/store")
"""Read-only in every sandbox, where they exist (a symbolic link, like /bin -> usr/bin, stays one)."""

SYSTEM_SECRETS = (
    "/etc/shadow",
    "/etc/gshadow",
    "/etc/shadow-",
    "/etc/gshadow-",
    "/etc/sudoers",
    "/etc/ssh",
    "/etc/ssl/private",
    "/etc/sudoers.d",
)
"""Hidden inside /etc."""

HOME_SECRETS = (
    ".ssh",
    ".gnupg",
    ".aws",
    ".azure",
    ".config/gcloud",
    ".kube",
    ".docker",
    ".netrc",
    ".git-credentials",
    ".password-store",
    ".local/share/keyrings",
    ".pki",
    ".npmrc",
    ".pypirc",
    ".config/gh",
    ".config/hub",
    ".vault-token",
    ".terraform.d",
    "Library/Keychains",
    ".mozilla",
    ".config/google-chrome",
    ".config/chromium",
)
"""Folders and files in a home folder that hold credentials: hidden inside any bound folder that holds them,
unless a `read` or `write` path names them; a path inside one opens only itself."""

_RESOLV = ("/run/systemd/resolve", "/run/resolvconf", "/run/NetworkManager")
"""Where /etc/resolv.conf may point: bound read-only when the server has the network."""

_INSTALL_HINT = "install bubblewrap (Debian and Ubuntu: apt install bubblewrap; Fedora: dnf install bubblewrap)"


class SandboxUnavailable(RuntimeError):
    """A server asked for a sandbox that cannot be set up here."""


@dataclass(frozen=True)
class Sandbox:
    """A server's sandbox, every value settled (`sandbox_of`)."""

    profile: str
    network: str
    read: tuple[Path, ...]
    write: tuple[Path, ...]
    memory: int | None
    processes: int | None
    cpu_seconds: int | None
    file_size: int | None
    open_files: int | None
    required: bool

    def summary(self) -> str:
        """`standard: no network, 1 GiB, 256 processes`."""
        parts = ["no network" if self.network == "none" else "network"]
        if self.memory:
            parts.append(_size(self.memory))
        if self.processes:
            parts.append(f"{self.processes} processes")
        if self.read or self.write:
            parts.append(f"{len(self.read)} paths readable, {len(self.write)} writable")
        return f"{self.profile}: {', '.join(parts)}"


def sandbox_of(config: ServerConfig) -> Sandbox | None:
    """The sandbox a stdio server runs in, or None (no sandbox, or profile "off")."""
    settings: SandboxSettings | None = config.sandbox
    if config.command is None or settings is None or settings.profile in (None, "off"):
        return None
    profile = settings.profile
    limits = {key: getattr(settings, key) or default for key, default in PROFILE_LIMITS.items()}
    return Sandbox(
        profile=profile,
        network=settings.network or PROFILE_NETWORK[profile],
        read=tuple(_path(path) for path in settings.read),
        write=tuple(_path(path) for path in settings.write),
        required=settings.required is not False,
        **limits,
    )


def _path(path: str) -> Path:
    return Path(os.path.normpath(os.path.expanduser(path)))


# -- whether it can be done here ---------------------------------------------------------------------------------


@functools.cache
def unavailable() -> str | None:
    """Why no sandbox can be set up on this machine (None: it can), naming what to install or change."""
    if os.uname().sysname != "Linux":
        return (
            f"the sandbox needs Linux and bubblewrap ({os.uname().sysname} is not supported yet: docs/sandbox.md); "
            'set sandbox = "off" for this server to run it unconfined'
        )
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return f"bubblewrap (bwrap) is not installed: {_INSTALL_HINT}"
    probe = [bwrap, "--ro-bind", "/", "/", "--unshare-all", "--unshare-user", "--die-with-parent", "--", "/bin/true"]
    try:
        done = subprocess.run(probe, capture_output=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bubblewrap could not run ({exc})"
    if done.returncode != 0:
        said = done.stderr.decode(errors="replace").strip().splitlines()
        return (
            f"bubblewrap cannot make namespaces here ({said[-1] if said else done.returncode}): unprivileged "
            "user namespaces may be turned off (sysctl kernel.unprivileged_userns_clone=1, or an AppArmor "
            "profile for bwrap on Ubuntu 24.04)"
        )
    return None


def describe(config: ServerConfig) -> dict[str, Any] | None:
    """What /healthz and `check` say of a stdio server's sandbox (None: not a stdio server)."""
    if config.command is None:
        return None
    sandbox = sandbox_of(config)
    if sandbox is None:
        return {"profile": "off", "status": "off", "summary": "off: the server runs unconfined"}
    why = unavailable()
    report: dict[str, Any] = {
        "profile": sandbox.profile,
        "network": sandbox.network,
        "memory": sandbox.memory,
        "processes": sandbox.processes,
    }
    missing = next((path for path in sandbox.write if not path.exists()), None)
    if why is None and missing is not None:
        report["status"] = "refused"
        report["summary"] = f"not started: {_missing_write(missing)}"
    elif why is None:
        cgroups = Cgroups.here()
        report["status"] = "on"
        report["summary"] = sandbox.summary()
        if cgroups is None or not cgroups.controllers:
            report["summary"] += " (memory and process limits not enforced: no writable cgroup)"
    elif sandbox.required:
        report["status"] = "refused"
        report["summary"] = f"not started: {why}"
    else:
        report["status"] = "unavailable"
        report["summary"] = f"UNCONFINED: {why}"
    return report


# -- the command line ------------------------------------------------------------------------------------------


@dataclass
class Confinement:
    """A started (or starting) sandboxed server: the command that starts it, its cgroup, and how it ended."""

    sandbox: Sandbox
    argv: list[str]
    cgroup: Cgroup | None = None
    env: dict[str, str] = field(default_factory=dict)
    """Variables added to the server's environment (a package runner's cache, and that it is offline)."""
    prepare: list[str] | None = None
    """A package runner's command line that fetches the server's package into its cache first, with the
    network (the server then runs offline, without it)."""
    fetch_env: dict[str, str] = field(default_factory=dict)
    """Variables added to the environment of `prepare`: the cache's, online."""
    key: tuple[str, ...] = ()

    async def prepared(self, env: Mapping[str, str], seconds: float) -> None:
        """Fetch the server's package (`prepare`, in `env` without the server's own variables), once per hub
        process; a failure is logged, and the server started anyway (its package may be in the cache already;
        if not, it says so on its stderr)."""
        if self.prepare is None or self.key in _PREPARED:
            return
        fetching = {name: value for name, value in os.environ.items() if _FETCH_VARIABLES.match(name)}
        environment = {**env, **fetching, **self.fetch_env}
        try:
            with anyio.fail_after(seconds):
                done = await anyio.run_process(self.prepare, env=environment, check=False, stdin=subprocess.DEVNULL)
        except TimeoutError:
            logger.warning("fetching the package of %s timed out after %gs", " ".join(self.key), seconds)
            return
        if done.returncode == 0:
            _PREPARED.add(self.key)
        else:
            said = done.stderr.decode(errors="replace").strip().splitlines()[-3:]
            logger.warning("fetching the package of %s failed: %s", " ".join(self.key), " / ".join(said))

    def ended(self, returncode: int) -> tuple[str, str | None]:
        """How the server's process ended, in words, and the limit that ended it (None: none did)."""
        limit = None
        if self.cgroup is not None:
            limit = self.cgroup.verdict(returncode, self.sandbox)
        if limit is None and returncode in (-signal.SIGXCPU, 128 + signal.SIGXCPU):
            limit = f"its CPU time limit ({self.sandbox.cpu_seconds} s)"
        if limit is None and returncode in (-signal.SIGXFSZ, 128 + signal.SIGXFSZ):
            limit = f"its file size limit ({_size(self.sandbox.file_size or 0)})"
        if limit is None:
            return exit_status(returncode), None
        return f"the server was killed for {limit}", limit

    def release(self) -> None:
        if self.cgroup is not None:
            self.cgroup.remove()


def confine(config: ServerConfig, command: str, args: Iterable[str], cwd: str | None) -> Confinement | None:
    """How to start `command args` for a stdio server in its sandbox (None: it has none, or the hub-wide
    default cannot be set up here and it runs unconfined). Raises `SandboxUnavailable` where it asked for one
    itself and none can be set up."""
    sandbox = sandbox_of(config)
    if sandbox is None:
        return None
    why = unavailable()
    if why is not None:
        if sandbox.required:
            raise SandboxUnavailable(f"the server's sandbox cannot be set up: {why}")
        _warn_unconfined(config.name, why)
        return None
    args = list(args)
    env: dict[str, str] = {}
    fetch_env: dict[str, str] = {}
    prepare = None
    runner = PACKAGE_RUNNERS.get(Path(command).name)
    if runner is not None:
        cache = state_folder() / "sandbox-cache" / runner.name
        cache.mkdir(parents=True, exist_ok=True)
        env, fetch_env = runner.cache_env(cache), runner.fetch_env(cache)
        sandbox = dataclasses.replace(sandbox, write=(*sandbox.write, cache))
        fetch_args = runner.fetch_args(args)
        if sandbox.network == "none" and fetch_args is not None:
            env = {**env, **runner.offline}
            fetching = dataclasses.replace(sandbox, network="any", read=(), write=(cache,))
            prepare = bubblewrap_argv(fetching, command, fetch_args, cwd, config)
    bwrap = bubblewrap_argv(sandbox, command, args, cwd, config)
    cgroups = Cgroups.here()
    cgroup = cgroups.make(config.name, sandbox) if cgroups is not None else None
    argv = _shell_argv(sandbox, cgroup, bwrap)
    return Confinement(sandbox, argv, cgroup, env, prepare, fetch_env, (command, *args))


# -- package runners ---------------------------------------------------------------------------------------------

_FETCH_VARIABLES = re.compile(
    r"(?i)^(https?_proxy|all_proxy|no_proxy|ssl_cert_(file|dir)|requests_ca_bundle|node_extra_ca_certs"
    r"|npm_config_(registry|proxy|https_proxy|cafile|strict_ssl)|uv_(index_url|default_index|extra_index_url"
    r"|index|native_tls|system_certs|python)|pip_(index_url|extra_index_url|cert))$"
)
"""The hub's own variables a package fetch goes on with (proxies, certificate authorities, package indexes): the
server's own variables, which may hold secrets, are not given to the fetch."""

_PREPARED: set[tuple[str, ...]] = set()
"""The package runners' command lines whose packages this hub process has fetched."""


@dataclass(frozen=True)
class PackageRunner:
    """A command that fetches a package and runs it (`npx`, `uvx`): in a sandbox, it keeps its packages in a
    cache folder of the hub's (not the user's own cache, hidden with the home folder), fetched with the network
    before the server starts, and runs them offline where the server has no network."""

    name: str
    cache_variables: tuple[str, ...]
    offline: Mapping[str, str]
    valued: frozenset[str]
    """Its options that take a value (the next argument)."""
    fetch: tuple[str, ...]
    """What runs once the package is fetched, in place of the server: `{}` is the package."""
    prefer_cache: Mapping[str, str] = field(default_factory=dict)

    def cache_env(self, cache: Path) -> dict[str, str]:
        return {variable: str(cache) for variable in self.cache_variables}

    def fetch_env(self, cache: Path) -> dict[str, str]:
        """The cache's variables for the fetch, which asks the registry only for what the cache lacks."""
        return {**self.cache_env(cache), **self.prefer_cache}

    def fetch_args(self, args: list[str]) -> list[str] | None:
        """The arguments that fetch the package `args` run, and do nothing else (None: no package found)."""
        options: list[str] = []
        index = 0
        while index < len(args) and args[index].startswith("-"):
            option = args[index]
            taken = 2 if option in self.valued else 1
            options += args[index : index + taken]
            index += taken
        if index >= len(args):
            return None
        if self.name == "uvx" and "--from" in options:
            return [*options, *self.fetch[2:]]
        return [*options, *(part.replace("{}", args[index]) for part in self.fetch)]


PACKAGE_RUNNERS: Mapping[str, PackageRunner] = {
    "npx": PackageRunner(
        "npx",
        ("npm_config_cache",),
        {"npm_config_offline": "true", "npm_config_update_notifier": "false"},
        frozenset({"-p", "--package", "--registry", "--userconfig", "--cache"}),
        ("--package", "{}", "-c", "true"),
        {"npm_config_prefer_offline": "true"},
    ),
    "uvx": PackageRunner(
        "uvx",
        ("UV_CACHE_DIR",),
        {"UV_OFFLINE": "1"},
        frozenset(
            {
                "--from",
                "--with",
                "--with-editable",
                "--with-requirements",
                "--python",
                "-p",
                "--index",
                "--index-url",
                "--default-index",
                "--extra-index-url",
                "-i",
                "--constraints",
                "-c",
            }
        ),
        ("--from", "{}", "python", "-c", "0"),
    ),
}


@functools.cache
def _warn_unconfined(name: str, why: str) -> None:
    logger.warning("server %r runs UNCONFINED: the hub-wide [sandbox] cannot be set up here: %s", name, why)


def bubblewrap_argv(
    sandbox: Sandbox, command: str, args: list[str], cwd: str | None, config: ServerConfig
) -> list[str]:
    """bubblewrap's command line for `command args` in `sandbox`."""
    home = _path(os.environ.get("HOME") or os.path.expanduser("~"))
    argv = [
        shutil.which("bwrap") or "bwrap",
        "--unshare-user",
        "--unshare-ipc",
        "--unshare-pid",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--die-with-parent",
        "--new-session",
        "--cap-drop",
        "ALL",
    ]
    if sandbox.network == "none":
        argv.append("--unshare-net")
    for path in SYSTEM_PATHS:
        if os.path.islink(path):
            argv += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            argv += ["--ro-bind", path, path]
    if sandbox.network != "none":
        argv += [arg for path in _RESOLV if os.path.isdir(path) for arg in ("--ro-bind", path, path)]
    for secret in SYSTEM_SECRETS:
        argv += _hide(Path(secret))
    argv += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--tmpfs", str(home)]
    named = (*sandbox.read, *sandbox.write)
    own = [*program_paths(command), *_script_paths(command, args), *_file_args(args), *_cwd(cwd)]
    binds = {path: "--ro-bind" for path in _outside(own, home) if path.exists()}
    binds |= {path: "--ro-bind" for path in (*sandbox.read, *_roots(config)) if path.exists()}
    for path in sandbox.write:
        if not path.exists():
            raise SandboxUnavailable(_missing_write(path))
        binds[path] = "--bind"
    bound = [path for path in binds if not any(_within(path, Path(system)) for system in SYSTEM_PATHS)]
    hidden = _secrets_within(bound, home, named, config)
    inside = [path for path in bound if any(_within(path, secret) for secret in hidden)]
    # A folder before what is bound inside it; the secrets hidden over the folders that hold them; then what is
    # bound inside a hidden secret (the hub's package cache inside its state folder, say), over the hiding.
    for path in sorted((path for path in bound if path not in inside), key=lambda path: len(path.parts)):
        argv += [binds[path], str(path), str(path)]
    for secret in hidden:
        argv += _hide(secret)
    for path in sorted(inside, key=lambda path: len(path.parts)):
        argv += [binds[path], str(path), str(path)]
    workdir = cwd if cwd and any(_within(Path(cwd), path) for path in bound) else str(home)
    argv += ["--chdir", workdir, "--", command, *args]
    return argv


def _missing_write(path: Path) -> str:
    return f"{path} (sandbox write) does not exist; create it, or remove it from write"


def _hide(path: Path) -> list[str]:
    """bubblewrap's arguments that put something empty where `path` is (nothing: it does not exist)."""
    if path.is_dir():
        return ["--tmpfs", str(path)]
    if path.exists():
        return ["--ro-bind", "/dev/null", str(path)]
    return []


def _secrets_within(bound: list[Path], home: Path, named: tuple[Path, ...], config: ServerConfig) -> list[Path]:
    """The secrets-bearing paths inside the bound ones that no `read` or `write` path names itself (a folder holding
    one does not open it; a path inside one is bound over its hiding, and opens only itself)."""
    secrets = [home / secret for secret in HOME_SECRETS] + [state_folder()]
    if config.env.get("HOME"):
        secrets += [Path(config.env["HOME"]) / secret for secret in HOME_SECRETS]
    found = []
    for secret in secrets:
        if secret not in named and any(_within(secret, path) and secret != path for path in bound):
            found.append(secret)
    return found


def _within(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def _outside(paths: Iterable[Path], home: Path) -> list[Path]:
    """`paths` found for the server's own program, but never the home folder or a folder above it (a script in
    the home folder does not open the home folder to the server; a `read` path may)."""
    return list(dict.fromkeys(path for path in paths if not _within(home, path)))


def _roots(config: ServerConfig) -> list[Path]:
    """The folders the table's `roots` name (the hub's answer to the server's `roots/list`): readable."""
    return [Path(url2pathname(urlsplit(root).path)) for root in config.roots or () if root.startswith("file:")]


def _cwd(cwd: str | None) -> list[Path]:
    return [Path(cwd)] if cwd and Path(cwd).is_dir() else []


def _file_args(args: list[str]) -> list[Path]:
    """The arguments that are absolute paths of existing files (a configuration file, a database)."""
    return [Path(arg) for arg in args if os.path.isabs(arg) and os.path.isfile(arg)]


_INTERPRETERS = re.compile(r"^(python[0-9.]*|node|nodejs|deno|bun|ruby|perl|php|java|sh|bash)$")


def _script_paths(command: str, args: list[str]) -> list[Path]:
    """The folder of the script an interpreter runs (`python /srv/server.py`: /srv), which its imports need."""
    if not _INTERPRETERS.match(Path(command).name):
        return []
    for arg in args:
        if arg.startswith("-"):
            if arg in ("-m", "-c", "-e"):
                return []
            continue
        path = Path(arg)
        return [path.parent] if path.is_absolute() and path.is_file() else []
    return []


def program_paths(command: str) -> list[Path]:
    """What running `command` reads outside the system folders: its installation (a virtual environment and
    the Python it was made from, with the source folders its editable installs name; a `node_modules` folder;
    a prefix like ~/.local), and the same for the interpreter its `#!` line names."""
    found: list[Path] = []
    todo, seen = [command], set[str]()
    while todo and len(seen) < 8:
        exe = todo.pop()
        if exe in seen:
            continue
        seen.add(exe)
        for path in dict.fromkeys((Path(exe), Path(os.path.realpath(exe)))):
            found += _installation(path)
        interpreter = _shebang(Path(os.path.realpath(exe)))
        if interpreter is not None:
            todo.append(interpreter)
    return list(dict.fromkeys(found))


def _installation(path: Path) -> list[Path]:
    if "node_modules" in path.parts:
        index = path.parts.index("node_modules")
        return [Path(*path.parts[: index + 1])]
    bin_dir = path.parent
    if (bin_dir.parent / "pyvenv.cfg").is_file():
        return _virtual_environment(bin_dir.parent)
    if bin_dir.name == "bin":
        return [bin_dir.parent]
    return [bin_dir]


def _virtual_environment(venv: Path) -> list[Path]:
    paths = [venv]
    with contextlib.suppress(OSError):
        for line in (venv / "pyvenv.cfg").read_text().splitlines():
            key, _, value = line.partition("=")
            if key.strip() == "home" and value.strip():
                home = Path(value.strip())
                paths.append(home.parent if home.name == "bin" else home)
    for site in venv.glob("lib/python*/site-packages"):
        paths += _editable_sources(site)
    return paths


_QUOTED_PATH = re.compile(r"""['"](/[^'"\n]+)['"]""")


def _editable_sources(site: Path) -> list[Path]:
    """The source folders a site-packages' editable installs (`.pth` lines, setuptools' finders) name."""
    found: list[Path] = []
    with contextlib.suppress(OSError):
        for pth in site.glob("*.pth"):
            for line in pth.read_text(errors="replace").splitlines():
                if line.startswith("/") and os.path.isdir(line.strip()):
                    found.append(Path(line.strip()))
        for finder in site.glob("__editable__*finder.py"):
            for line in finder.read_text(errors="replace").splitlines():
                if line.startswith("MAPPING"):
                    found += [Path(p) for p in _QUOTED_PATH.findall(line) if os.path.exists(p)]
    return found


def _shebang(path: Path) -> str | None:
    """The interpreter a script's `#!` line names (`#!/usr/bin/env node`: node, found on PATH)."""
    try:
        with path.open("rb") as file:
            line = file.readline(256)
    except OSError:
        return None
    if not line.startswith(b"#!"):
        return None
    words = line[2:].decode(errors="replace").split()
    if not words:
        return None
    if Path(words[0]).name == "env":
        names = [word for word in words[1:] if not word.startswith("-")]
        return shutil.which(names[0]) if names else None
    return words[0]


def _shell_argv(sandbox: Sandbox, cgroup: Cgroup | None, bwrap: list[str]) -> list[str]:
    """/bin/sh joining the cgroup and setting the rlimits, then exec'ing bubblewrap."""
    steps = ['for f; do shift; [ "$f" = -- ] && break; echo 0 > "$f" || exit 126; done']
    if sandbox.open_files:
        steps.append(f"ulimit -n {int(sandbox.open_files)}")
    if sandbox.file_size:
        steps.append(f"ulimit -f {max(1, int(sandbox.file_size) // 512)}")
    if sandbox.cpu_seconds:
        seconds = int(sandbox.cpu_seconds)  # SIGXCPU at the limit, SIGKILL a second later if it is caught
        steps.append(f"ulimit -H -t {seconds + 1}; ulimit -S -t {seconds}")
    steps.append('exec "$@"')
    procs = [str(path) for path in cgroup.procs()] if cgroup is not None else []
    return ["/bin/sh", "-c", "; ".join(steps), "mcp-hub-sandbox", *procs, "--", *bwrap]


# -- cgroups -----------------------------------------------------------------------------------------------------

_COUNTER = itertools.count(1)


@dataclass
class Cgroups:
    """Where this hub can make cgroups for its servers: a folder per controller it can write (cgroup v1)."""

    controllers: dict[str, Path]

    @staticmethod
    @functools.cache
    def here() -> Cgroups | None:
        """The hub's own cgroups of the `memory` and `pids` controllers, where it may make children of them."""
        try:
            mounts = Path("/proc/self/mountinfo").read_text().splitlines()
            own = Path("/proc/self/cgroup").read_text().splitlines()
        except OSError:
            return None
        paths = {}
        for line in own:
            _, names, path = line.split(":", 2)
            for name in names.split(","):
                paths[name] = path
        controllers: dict[str, Path] = {}
        for line in mounts:
            before, _, after = line.partition(" - ")
            fields, extra = before.split(), after.split()
            if len(extra) < 3 or extra[0] != "cgroup":
                continue
            root, mountpoint = fields[3], fields[4]
            for name in ("memory", "pids"):
                if name in extra[2].split(",") and name in paths:
                    relative = os.path.relpath(paths[name], root) if paths[name].startswith(root) else "."
                    folder = Path(mountpoint) / relative
                    base = folder / f"mcp-hub.{os.getpid()}"
                    if os.access(folder, os.W_OK) or base.is_dir():
                        controllers[name] = base
                        _remove_abandoned(folder)
        return Cgroups(controllers) if controllers else None

    def make(self, name: str, sandbox: Sandbox) -> Cgroup | None:
        """A new cgroup for one server process, with the sandbox's limits (None: none could be made)."""
        folders: dict[str, Path] = {}
        try:
            for controller, base in self.controllers.items():
                base.mkdir(exist_ok=True)
                folder = base / f"{name}.{next(_COUNTER)}"
                folder.mkdir()
                folders[controller] = folder
            if "memory" in folders and sandbox.memory:
                _write(folders["memory"] / "memory.limit_in_bytes", sandbox.memory)
                with contextlib.suppress(OSError):  # where swap is accounted, it is no way around the limit
                    _write(folders["memory"] / "memory.memsw.limit_in_bytes", sandbox.memory)
            if "pids" in folders and sandbox.processes:
                _write(folders["pids"] / "pids.max", sandbox.processes)
        except OSError as exc:
            logger.warning("server %r: no cgroup for its limits (%s); memory and processes are not limited", name, exc)
            Cgroup(folders).remove()
            return None
        return Cgroup(folders)


def _remove_abandoned(folder: Path) -> None:
    """The empty cgroups of hubs that have exited (killed before they could remove them; their servers died with
    them: bubblewrap's `--die-with-parent`)."""
    for base in folder.glob("mcp-hub.*"):
        pid = base.name.removeprefix("mcp-hub.")
        if not pid.isdigit() or Path(f"/proc/{pid}").exists():
            continue
        with contextlib.suppress(OSError):
            for group in base.iterdir():
                if group.is_dir():
                    group.rmdir()
            base.rmdir()


def limit_refusals(name: str) -> str | None:
    """What the running sandboxed processes of the mount `name` were refused at their process limit, if any."""
    cgroups = Cgroups.here()
    base = cgroups.controllers.get("pids") if cgroups is not None else None
    if base is None or not base.is_dir():
        return None
    refused = sum(_read_counts(folder / "pids.events").get("max", 0) for folder in base.glob(f"{name}.*"))
    return f"{refused} new processes or threads refused at its process limit" if refused else None


def _write(path: Path, value: int) -> None:
    path.write_text(f"{value}\n")


def _read_counts(path: Path) -> dict[str, int]:
    """A cgroup file of "key value" lines."""
    counts = {}
    with contextlib.suppress(OSError, ValueError):
        for line in path.read_text().splitlines():
            key, _, value = line.partition(" ")
            if value.strip().isdigit():
                counts[key] = int(value)
    return counts


@dataclass
class Cgroup:
    """One server process's cgroups (one per controller)."""

    folders: dict[str, Path]

    def procs(self) -> list[Path]:
        return [folder / "cgroup.procs" for folder in self.folders.values()]

    def verdict(self, returncode: int, sandbox: Sandbox) -> str | None:
        """The limit that ended the process, where the counters say one did."""
        memory = self.folders.get("memory")
        if memory is not None and returncode in (-signal.SIGKILL, 128 + signal.SIGKILL):
            control = _read_counts(memory / "memory.oom_control")
            try:
                failcnt = int((memory / "memory.failcnt").read_text())
            except (OSError, ValueError):
                failcnt = 0
            if control.get("oom_kill", 0) > 0 or ("oom_kill" not in control and failcnt > 0):
                return f"its memory limit ({_size(sandbox.memory or 0)})"
        return None

    def remove(self) -> None:
        """Kill what is left in the cgroups, and remove them."""
        for folder in self.folders.values():
            for _ in range(50):
                try:
                    folder.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    self._kill(folder)
            with contextlib.suppress(OSError):  # the hub's folder, once its last server's is gone
                folder.parent.rmdir()
        self.folders = {}

    @staticmethod
    def _kill(folder: Path) -> None:
        try:
            pids = [int(pid) for pid in (folder / "cgroup.procs").read_text().split()]
        except (OSError, ValueError):
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        if pids:
            time.sleep(0.01)


def _size(size: int) -> str:
    for unit, factor in (("GiB", GIB), ("MiB", 1024**2), ("KiB", 1024)):
        if size >= factor and size % factor == 0:
            return f"{size // factor} {unit}"
    return f"{size} bytes"
