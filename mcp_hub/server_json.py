"""A registry entry (`server.json`, the MCP Registry's format) as a `[servers.NAME]` table of hub.toml.

An entry offers packages (each `registryType`, `identifier`, `version`, `transport`, `runtimeArguments`,
`packageArguments`, `environmentVariables`) and remotes (each `type`, `url`, `headers`, `variables`). One of them
becomes the table: `use` names the kind (npm, pypi, oci or remote); without it, the first package the hub can run,
else the first remote. Every version is pinned:

- an npm package: `command = "npx"`, `args = ["-y", RUNTIME ARGS..., "PKG@VERSION", PACKAGE ARGS...]`;
- a PyPI package: `command = "uvx"`, `args = [RUNTIME ARGS..., "PKG==VERSION", PACKAGE ARGS...]`;
- an OCI image: `command = "docker"` (`podman` where the entry's `runtimeHint` says so), `args = ["run", "-i",
  "--rm", "-e", "VAR"..., RUNTIME ARGS..., "IMAGE:TAG", PACKAGE ARGS...]` (`-e VAR` passes each of its
  environment variables on), and `sandbox = "off"`: the container is its sandbox;
- a remote: `url`, `transport` (`streamable-http` or `sse`), and its headers in `[servers.NAME.headers]`.

Environment variables go in `[servers.NAME.env]`, each under a comment with its description: a secret, or a
required value without a default, as a `${VAR}` reference (listed in `Added.required`, to export); a default as
the value; an optional one without a default as a commented-out line. Arguments and headers alike (a `{name}` in
an input's value is filled from its `variables`); a secret is never written in clear, only referenced. A stdio
server's sandbox is proposed as `mcp-hub import` proposes it (`importer.propose_sandbox`), with the network for
a package whose entry also names remotes (it talks to that service) or takes a secret.

A field the hub cannot use is an error naming it (as `packages[0].version`) and the fix. Pure: no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import tomlkit
from tomlkit.items import Table

from mcp_hub.config import MOUNT_NAME_PATTERN, to_mount_name
from mcp_hub.errors import ConfigError
from mcp_hub.importer import propose_sandbox, variable_name
from mcp_hub.registry import VERSION_RANGE
from mcp_hub.shown import shown

KINDS = ("npm", "pypi", "oci", "remote")
"""What `use` may name: the package registries the hub runs packages of, and a remote endpoint."""

_RUNTIMES = {"npm": ("npx",), "pypi": ("uvx",), "oci": ("docker", "podman")}
"""The commands that run each kind of package, the default first."""
_REMOTE_TYPES = ("streamable-http", "sse")
_TEMPLATE = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
_PINNED_IMAGE = re.compile(r"(?::[\w][\w.-]*|@sha256:[0-9a-f]{64})\Z")
"""An image reference that names its tag or digest (after the last slash)."""


@dataclass
class Added:
    """What `server_table` made of an entry."""

    name: str
    """The mount name."""
    kind: str
    """npm, pypi, oci or remote."""
    table: Table
    required: list[str] = field(default_factory=list)
    """The variables the table references without a default: the user exports them before serving."""

    def document(self) -> tomlkit.TOMLDocument:
        """The table as a hub.toml document of its own (`[servers.NAME]`), for `importer.merge_into`."""
        servers = tomlkit.table(is_super_table=True)
        servers.add(self.name, self.table)
        document = tomlkit.document()
        document.add("servers", servers)
        return document


@dataclass
class _Entry:
    """The entry being converted: where it came from (for errors), and the comments and variables gathered."""

    where: str
    mount: str
    notes: list[str] = field(default_factory=list)
    required: list[str] = field(default_factory=list)

    def error(self, key: str, reason: str) -> ConfigError:
        return ConfigError(self.where, key, reason)

    def note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)

    def need(self, variable: str, description: str) -> str:
        """A `${variable}` reference the user must export; noted once."""
        if variable not in self.required:
            self.required.append(variable)
            self.note(f"export {variable} before serving" + (f": {description}" if description else ""))
        return f"${{{variable}}}"

    def variable(self, label: str) -> str:
        """The variable standing for an input the entry names `label` (an argument, a header, a `{name}`): the mount
        name first, as two servers may both have a `token`."""
        return variable_name(f"{self.mount}_{label}").upper()


def server_table(
    listing: dict[str, Any], *, where: str, name: str | None = None, use: str | None = None, status: str = ""
) -> Added:
    """The `[servers.NAME]` table for a registry listing (`{"server": <server.json>, ...}`). `where` names the entry
    in errors (registry and NAME@VERSION); `name`: the mount name (default: from the entry's name); `use`: which
    kind to run (see the module's docstring); `status`: the registry's word on the version (deprecated: noted)."""
    entry = listing.get("server")
    if not isinstance(entry, dict):
        raise ConfigError(where, "server", "is missing; the registry's answer holds no server.json")
    state = _Entry(where, "")
    server_name = _string(entry, "name", state, "")
    version = _string(entry, "version", state, "")
    state.mount = name if name is not None else to_mount_name(server_name.rpartition("/")[2])
    if not MOUNT_NAME_PATTERN.match(state.mount):
        reason = f"{state.mount!r} is not a mount name: lowercase letters, digits and '-', starting with a letter"
        raise ConfigError("--name", "", f"{reason}, at most 32; choose another")
    description = entry.get("description")
    header = f"{server_name} {version}" + (f": {description}" if isinstance(description, str) else "")
    state.note(shown(header))
    if status:
        state.note(shown(f"the registry marks this version {status}"))
    kind, key, item = _choose(entry, use, state)
    if kind == "remote":
        values, tables = _remote(item, key, state)
    else:
        values, tables = _package(item, kind, key, entry, state)
    table = tomlkit.table()
    for note in state.notes:
        table.add(tomlkit.comment(note))
    for value_key, value in values.items():
        table.add(value_key, value)
    for table_key, sub in tables.items():
        table.add(table_key, sub)
    return Added(state.mount, kind, table, state.required)


# -- choosing ----------------------------------------------------------------------------------


def _choose(entry: dict[str, Any], use: str | None, state: _Entry) -> tuple[str, str, dict[str, Any]]:
    """The kind, key (`packages[0]`) and object of the package or remote to run."""
    packages = _checked_list(entry, "packages", state)
    remotes = _checked_list(entry, "remotes", state)
    offered: list[tuple[str, str, dict[str, Any]]] = []
    for index, package in enumerate(packages):
        key = f"packages[{index}]"
        registry_type = _string(package, "registryType", state, key)
        offered.append((registry_type, key, package))
    offered += [("remote", f"remotes[{index}]", remote) for index, remote in enumerate(remotes)]
    if not offered:
        raise state.error("", "offers no package and no remote to run; install it as its website says")
    if use is not None:
        chosen = [item for item in offered if item[0] == use]
        if not chosen:
            has = ", ".join(dict.fromkeys(kind for kind, _, _ in offered))
            raise state.error("", f"offers no {use} (it offers {has}); choose one of those with --use")
        return chosen[0]
    for item in offered:
        if item[0] in KINDS:
            return item
    kind, key, _ = offered[0]
    reason = f"{kind!r} packages are not supported: the hub runs npm, pypi and oci packages, and remotes"
    raise state.error(f"{key}.registryType", reason)


# -- packages ----------------------------------------------------------------------------------


def _package(
    package: dict[str, Any], kind: str, key: str, entry: dict[str, Any], state: _Entry
) -> tuple[dict[str, Any], dict[str, Table]]:
    identifier = _string(package, "identifier", state, key)
    transport = package.get("transport", {"type": "stdio"})
    kind_of = transport.get("type") if isinstance(transport, dict) else None
    if kind_of != "stdio":
        reason = (
            "the hub starts packages that speak stdio; this one serves HTTP on a port of its own: run it yourself "
            "and mount its URL, or use the entry's remote (--use remote)"
            if kind_of in _REMOTE_TYPES
            else 'must be {"type": "stdio"} (or streamable-http, sse); fix the entry'
        )
        raise state.error(f"{key}.transport", reason)
    runtime = _runtime(package, kind, key, state)
    runtime_args = _arguments(package, "runtimeArguments", key, state)
    package_args = _arguments(package, "packageArguments", key, state)
    env, env_table = _environment(package, key, state)
    if kind == "oci":
        image = _image(package, identifier, key, state)
        passed = [word for variable in env for word in ("-e", variable)]
        args = ["run", "-i", "--rm", *passed, *runtime_args, image, *package_args]
    else:
        version = _pinned(package, key, state)
        pinned = f"{identifier}@{version}" if kind == "npm" else f"{identifier}=={version}"
        args = [*(["-y"] if kind == "npm" else []), *runtime_args, pinned, *package_args]
    _registry_base(package, kind, key, state)
    values: dict[str, Any] = {"command": runtime, "args": args}
    if kind == "oci":
        state.note(f"sandbox: off, as {runtime} runs it in a container of its own (the container is its sandbox)")
        values["sandbox"] = "off"
    else:
        network = None
        if _list(entry, "remotes"):
            network = "its registry entry also names a remote service"
        elif any(item.get("isSecret") is True for item in _list(package, "environmentVariables")):
            network = "it is given a secret, a credential for a service"
        sandbox = propose_sandbox({**values, "env": env}, state.note, network)
        if sandbox is not None:
            values["sandbox"] = sandbox
    return values, ({"env": env_table} if env_table is not None else {})


def _runtime(package: dict[str, Any], kind: str, key: str, state: _Entry) -> str:
    hint = package.get("runtimeHint")
    runtimes = _RUNTIMES[kind]
    if hint is None or hint in runtimes:
        return hint or runtimes[0]
    if not isinstance(hint, str):
        raise state.error(f"{key}.runtimeHint", "must be a string; fix the entry")
    state.note(shown(f"the entry suggests {hint} to run it; written for {runtimes[0]}, which runs {kind} packages"))
    return runtimes[0]


def _pinned(package: dict[str, Any], key: str, state: _Entry) -> str:
    version = package.get("version")
    if not isinstance(version, str) or not version:
        raise state.error(f"{key}.version", "is missing; a package's version must be given, to pin it")
    if version == "latest" or VERSION_RANGE.search(version):
        reason = f"{version!r} is not one version (a range, or latest); the registry entry must name one, like 1.2.3"
        raise state.error(f"{key}.version", reason)
    return version


def _image(package: dict[str, Any], identifier: str, key: str, state: _Entry) -> str:
    """The OCI image reference with its tag: the identifier's own, else `:version`."""
    if _PINNED_IMAGE.search(identifier.rpartition("/")[2]):
        return identifier
    if "version" not in package:
        reason = "names no tag or digest, and the package no version; the image must be pinned (IMAGE:TAG)"
        raise state.error(f"{key}.identifier", reason)
    return f"{identifier}:{_pinned(package, key, state)}"


def _registry_base(package: dict[str, Any], kind: str, key: str, state: _Entry) -> None:
    base = package.get("registryBaseUrl")
    defaults = {"npm": "https://registry.npmjs.org", "pypi": "https://pypi.org"}
    if isinstance(base, str) and kind in defaults and base.rstrip("/") != defaults[kind]:
        tool = "npm (npm_config_registry)" if kind == "npm" else "uv (UV_INDEX_URL)"
        state.note(shown(f"the package is on {base}, not {defaults[kind]}: point {tool} at it"))


def _arguments(package: dict[str, Any], field_name: str, key: str, state: _Entry) -> list[str]:
    """The words of a package's `runtimeArguments` or `packageArguments`."""
    words: list[str] = []
    for index, argument in enumerate(_checked_list(package, field_name, state, key)):
        at = f"{key}.{field_name}[{index}]"
        kind = argument.get("type")
        if kind not in ("positional", "named"):
            raise state.error(f"{at}.type", 'must be "positional" or "named"; fix the entry')
        flag = _string(argument, "name", state, at) if kind == "named" else None
        label = argument.get("valueHint") or (flag or "").lstrip("-") or f"arg_{index}"
        value = _input(argument, state.variable(str(label)), at, state, optional=f"argument {flag or label}")
        if value is not None:
            words += [flag, value] if flag else [value]
    return words


def _environment(package: dict[str, Any], key: str, state: _Entry) -> tuple[dict[str, str], Table | None]:
    """The package's environment variables: their values (for the sandbox's proposal) and the `env` table."""
    values: dict[str, str] = {}
    items = _checked_list(package, "environmentVariables", state, key)
    if not items:
        return values, None
    table = tomlkit.table()
    for index, variable in enumerate(items):
        at = f"{key}.environmentVariables[{index}]"
        name = _string(variable, "name", state, at)
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise state.error(f"{at}.name", f"{name!r} is not an environment variable's name; fix the entry")
        description = _describe(variable)
        value = _input(variable, name, at, state, optional=None)
        if description:
            table.add(tomlkit.comment(description))
        if value is None:
            table.add(tomlkit.comment(f'{name} = "${{{name}}}"  (optional: remove the "#" to pass it on)'))
            continue
        table.add(name, value)
        values[name] = value
    return values, table


# -- remotes -----------------------------------------------------------------------------------


def _remote(remote: dict[str, Any], key: str, state: _Entry) -> tuple[dict[str, Any], dict[str, Table]]:
    transport = remote.get("type")
    if transport not in _REMOTE_TYPES:
        raise state.error(f"{key}.type", 'must be "streamable-http" or "sse"; fix the entry')
    url = _string(remote, "url", state, key)
    variables = remote.get("variables", {})
    if not isinstance(variables, dict):
        raise state.error(f"{key}.variables", "must be an object; fix the entry")
    url = _fill(url, variables, f"{key}.url", state, url=True)
    if not re.match(r"https?://[^\s]+\Z", url.replace("${", "").replace("}", "")):
        raise state.error(f"{key}.url", "must be an http:// or https:// URL; fix the entry")
    values: dict[str, Any] = {"url": url, "transport": transport}
    headers = _checked_list(remote, "headers", state, key)
    if not headers:
        return values, {}
    table = tomlkit.table()
    for index, header in enumerate(headers):
        at = f"{key}.headers[{index}]"
        name = _string(header, "name", state, at)
        variable = state.variable(name)
        value = _input(header, variable, at, state, optional=None)
        description = _describe(header)
        if description:
            table.add(tomlkit.comment(description))
        if value is None:
            table.add(tomlkit.comment(f'"{name}" = "${{{variable}}}"  (optional: remove the "#" to send it)'))
            continue
        table.add(name, value)
    return values, {"headers": table}


# -- inputs ------------------------------------------------------------------------------------


def _input(item: dict[str, Any], variable: str, at: str, state: _Entry, optional: str | None) -> str | None:
    """The value an input (argument, environment variable, header) is written with, or None where it is optional
    and has none (then, for an argument, noted as `optional`)."""
    secret = item.get("isSecret") is True
    description = _describe(item)
    if "value" in item:
        return _fill(_text(item, "value", state, at), item.get("variables", {}), f"{at}.value", state)
    if secret:
        return state.need(variable, description)
    if "default" in item:
        return _literal(_text(item, "default", state, at))
    if item.get("isRequired") is True:
        return state.need(variable, description)
    if optional is not None:
        state.note(shown(f"optional {optional} left out" + (f": {description}" if description else "")))
    return None


def _fill(template: str, variables: Any, at: str, state: _Entry, *, url: bool = False) -> str:
    """`template` with each `{name}` its `variables` define filled (an input: its value or default, else a
    `${NAME}` reference), and every `$` escaped for hub.toml. A `{name}` they do not define stays as it is, as the
    schema says, except in a `url`, which it would leave invalid: there it is an error."""
    if not isinstance(variables, dict):
        raise state.error(at.rpartition(".")[0] + ".variables", "must be an object; fix the entry")
    parts: list[str] = []
    end = 0
    for match in _TEMPLATE.finditer(template):
        variable = variables.get(match[1])
        if not isinstance(variable, dict):
            if url:
                raise state.error(at, f"names {{{match[1]}}}, which its variables do not define; fix the entry")
            continue
        parts.append(_literal(template[end : match.start()]))
        end = match.end()
        filled = _input(variable, state.variable(match[1]), at, state, optional=None)
        parts.append(filled if filled is not None else state.need(state.variable(match[1]), _describe(variable)))
    parts.append(_literal(template[end:]))
    return "".join(parts)


def _literal(text: str) -> str:
    """A literal value in hub.toml's syntax: `$` escaped as `$$`."""
    return text.replace("$", "$$")


def _describe(item: dict[str, Any]) -> str:
    """An input's description (with its choices), safe for a one-line comment."""
    parts = []
    if isinstance(item.get("description"), str):
        parts.append(item["description"])
    choices = item.get("choices")
    if isinstance(choices, list) and choices:
        parts.append("one of " + ", ".join(str(choice) for choice in choices))
    flags = [flag for flag, key in (("required", "isRequired"), ("a secret", "isSecret")) if item.get(key) is True]
    return shown("; ".join([*parts, *flags]))


# -- shapes ------------------------------------------------------------------------------------


def _string(item: dict[str, Any], name: str, state: _Entry, key: str) -> str:
    value = item.get(name)
    at = f"{key}.{name}" if key else name
    if value is None:
        raise state.error(at, "is missing; the registry entry is incomplete (ask its publisher to fix it)")
    if not isinstance(value, str) or not value:
        raise state.error(at, "must be a non-empty string; the registry entry is malformed")
    return value


def _text(item: dict[str, Any], name: str, state: _Entry, key: str) -> str:
    """An input's `value` or `default`: a string, which may be empty."""
    value = item[name]
    if not isinstance(value, str):
        raise state.error(f"{key}.{name}", "must be a string; the registry entry is malformed")
    return value


def _list(item: dict[str, Any], name: str) -> list[dict[str, Any]]:
    value = item.get(name)
    return [each for each in value if isinstance(each, dict)] if isinstance(value, list) else []


def _checked_list(item: dict[str, Any], name: str, state: _Entry, key: str = "") -> list[dict[str, Any]]:
    value = item.get(name, [])
    at = f"{key}.{name}" if key else name
    if not isinstance(value, list) or not all(isinstance(each, dict) for each in value):
        raise state.error(at, "must be a list of objects; the registry entry is malformed")
    return value
