"""The hub.toml model and loader.

`load_config` / `parse_config` read a hub.toml in four steps and raise
`ConfigError(file, key, reason)`, naming the dotted key and the fix (every problem of a step at once, one
line each, when there are several):

1. TOML syntax (tomllib);
2. unknown keys, with a "did you mean" suggestion;
3. types, ranges and cross-field rules (the pydantic models below);
4. `${VAR}` expansion in the strings of enabled servers (command, args, env, cwd, url,
   headers, roots, and the values of their `auth` table), in `[auth] api_keys` and `[auth.oauth]`, in
   `[admin] keys` and `[admin.oidc]`, in `[cluster]`, and in `[telemetry] endpoint` and `headers`, then step 3
   again on the expanded values (a url may come from a variable).

A variable is looked up in the environment, then in the `[hub] env_file` (a dotenv file; the environment
wins). A variable a server's table needs and neither has does not stop the hub: that server is left out,
disabled, with the reason in `ServerConfig.unusable` (shown by `check`, `/healthz`, `tools` and the admin
console), and the others serve. One the hub-wide settings need (the keys, OAuth, the cluster, telemetry)
stops it. Disabled servers are not expanded: their variables need not be set.
"""

from __future__ import annotations

import difflib
import importlib.util
import ipaddress
import json
import math
import os
import re
import tomllib
import types
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal, Union, get_args, get_origin
from urllib.parse import urlsplit

from pydantic import BaseModel, ByteSize, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic_core import ErrorDetails, PydanticCustomError

from mcp_hub.errors import ConfigError
from mcp_hub.state import state_file

MOUNT_NAME_PATTERN = re.compile(r"^[a-z][a-z0-9-]{0,31}\Z")
"""A mount name: a lowercase letter, then up to 31 lowercase letters, digits and hyphens."""

_MODEL_CONFIG = ConfigDict(extra="forbid", frozen=True, strict=True)
_Seconds = Annotated[float, Field(gt=0, allow_inf_nan=False)]


def rule_error(reason: str, *key: str | int) -> PydanticCustomError:
    """A broken cross-field rule; `key` is appended to where pydantic reports it."""
    return PydanticCustomError("hub_rule", "{reason}", {"reason": reason, "key": key})


OFFICIAL_REGISTRY = "https://registry.modelcontextprotocol.io"
"""The official MCP Registry: where `mcp-hub add` and `mcp-hub registry search` look unless told otherwise."""


def is_registry_url(url: str) -> bool:
    """Whether `url` can be a registry's base URL: http or https, a host, no query or fragment."""
    parts = urlsplit(url)
    return parts.scheme in ("http", "https") and bool(parts.netloc) and not parts.query and not parts.fragment


def to_mount_name(name: str) -> str:
    """The valid mount name closest to `name`.

    Lowercase; runs of other characters become one hyphen; no leading/trailing hyphens;
    "s-" in front unless it starts with a letter; at most 32 characters.
    """
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    if not slug[:1].isalpha():
        slug = f"s-{slug}".rstrip("-")
    return slug[:32].rstrip("-")


class HubSettings(BaseModel):
    """The [hub] table."""

    model_config = _MODEL_CONFIG

    name: str = Field(default="mcp-hub", min_length=1)
    """The name the hub gives clients (its `serverInfo`)."""
    description: str = Field(
        default="One MCP endpoint in front of the MCP servers this hub mounts", min_length=1, max_length=100
    )
    """What the hub's server card says it does (`[http] server_cards`; at most 100 characters)."""
    page_size: int = Field(default=0, ge=0)
    """Items per page of the lists handed to clients (tools/list etc.); 0: each list on one page."""
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    """The least level logged (logs go to stderr)."""
    access_log: bool = False
    """One line per client request on the `mcp_hub.access` logger (at info)."""
    startup_grace: float = Field(default=10.0, ge=0)
    """Seconds after start-up during which a list waits for the servers still starting, and a call for the
    server it names (see startup.py); 0: answer at once with what has arrived."""
    env_file: str | None = Field(default=None, min_length=1)
    """A dotenv file (KEY=value lines; relative paths: from hub.toml's folder) the `${VAR}` references are
    also looked up in, after the environment: where a hub started without a shell (Claude Desktop) finds its
    secrets. None: the environment only."""
    catalog_snapshot: bool | str = True
    """Where the hub keeps its last known catalog, to serve at start-up before the servers connect:
    true: a file of this hub.toml's own in the user's state folder (see snapshot.py); a path: that file
    (relative paths: from hub.toml's folder); false: no snapshot."""
    registry: str = OFFICIAL_REGISTRY
    """The MCP server registry `mcp-hub add` and `mcp-hub registry search` read: its base URL (the registry API is
    below it, at /v0.1). The official MCP Registry by default; a subregistry of your own (one that serves the same
    API) otherwise. `--registry URL` goes over it."""

    @field_validator("registry")
    @classmethod
    def _registry_url(cls, url: str) -> str:
        if not is_registry_url(url):
            raise rule_error(
                f"registry is not a registry's base URL (http or https); write one like {OFFICIAL_REGISTRY}"
            )
        return url

    @field_validator("catalog_snapshot", mode="before")
    @classmethod
    def _names_a_file(cls, path: Any) -> Any:
        if not isinstance(path, bool | str) or path == "":
            got = "an empty string" if path == "" else _describe(path)
            raise rule_error(
                f"catalog_snapshot is true (a file in the user's state folder, the default), false (no snapshot) "
                f'or the path of a file, like "state/catalog.json"; got {got}'
            )
        if isinstance(path, str) and (path.endswith("/") or Path(path).name in ("", ".", "..")):
            folder = path.rstrip("/") or "."
            raise rule_error(f'catalog_snapshot names a folder; name a file in it, like "{folder}/catalog.json"')
        return path


class HttpSettings(BaseModel):
    """The [http] table: where the hub listens (port 0 = any free port)."""

    model_config = _MODEL_CONFIG

    host: str = Field(default="127.0.0.1", min_length=1)
    """The address to listen on; another than loopback needs client authentication ([auth]) or
    `allow_unauthenticated`."""
    port: int = Field(default=8765, ge=0, le=65535)
    """The port to listen on (0: any free port)."""
    path: str = "/mcp"
    """The MCP endpoint's path; curated endpoints are served below it (`/mcp/NAME`)."""
    max_request_mb: int = Field(default=32, ge=1)
    """The largest request body the endpoint takes, in MiB; a larger one is answered 413."""
    keep_alive: int = Field(default=75, ge=1)
    """Seconds an idle client connection is kept open. uvicorn's own default, 5, closes it between
    most of an agent's calls (and races a client reusing it); 75 outlasts the common 60 s idle
    timeout of load balancers in front of the hub."""
    session_idle_timeout: float = Field(default=1800.0, allow_inf_nan=False)
    """Seconds a client's session may go without an HTTP request in flight (no call being served, no
    open GET stream) before the hub closes it; its session id is then answered 404, and the client
    starts a new session. 0: sessions never expire (they last until their client ends them or the hub
    stops). 1800 (30 minutes) is the MCP SDK's default."""

    @field_validator("session_idle_timeout", mode="before")
    @classmethod
    def _seconds_or_never(cls, seconds: Any) -> Any:
        if isinstance(seconds, int | float) and not isinstance(seconds, bool) and not 0 <= seconds < math.inf:
            raise rule_error(
                f"session_idle_timeout must be a positive number of seconds or 0 (never), got {seconds:g}; "
                "write seconds like 1800, or 0 to keep sessions until their client ends them"
            )
        return seconds

    @property
    def session_idle_seconds(self) -> float | None:
        """`session_idle_timeout` as the SDK takes it: None (0 in hub.toml) for never."""
        return self.session_idle_timeout or None

    @field_validator("path")
    @classmethod
    def _absolute_path(cls, path: str) -> str:
        if not path.startswith("/"):
            raise rule_error(f'the endpoint path must start with "/"; write "/{path}"')
        return path

    health_stderr: bool = False
    """Add to `/healthz` and `/readyz`, under each stdio server that is not up, the last lines it wrote to stderr
    (`stderr_tail`), their secrets masked. False (the default): those pages answer anyone who reaches the hub,
    without signing in, and a server's stderr may say more than its state (paths, hosts, what it was given);
    the admin console and `mcp-hub check --connect` show them to an administrator."""

    server_cards: bool = True
    """Publish the hub's server card (the SEP-2127 draft, experimental) at `PATH/server-card`, each curated
    endpoint's at `PATH/NAME/server-card`, and an MCP Catalog of them at `/.well-known/mcp/catalog.json`: what
    a client needs to connect (the endpoint's URL, protocol versions, the API-key header when one is needed),
    readable without credentials, as `GET /` already is. False: none of them are served."""
    allow_unauthenticated: bool = False
    """Serve HTTP on an address other than loopback without client authentication (no `[auth] api_keys`, no
    `[auth.oauth]`): only behind something that authenticates every request itself. False: such a hub refuses
    to start (see `unauthenticated_exposure`)."""

    cors_origins: tuple[str, ...] = Field(default=(), strict=False)
    """The web origins (`https://host[:port]`) whose pages may call the endpoint from a browser (CORS); none
    by default."""

    forwarded_allow_ips: tuple[str, ...] | None = Field(default=None, strict=False)
    """The proxies in front of the hub whose `X-Forwarded-For` and `X-Forwarded-Proto` it takes (addresses or
    networks, "*" for any): the client's address in the audit line and the console's login throttle is then the
    one such a proxy names. Unset: uvicorn's default, the `FORWARDED_ALLOW_IPS` environment variable, else
    127.0.0.1 and ::1 (a proxy on the same host); [] trusts none (the peer's address is the client's)."""

    @field_validator("forwarded_allow_ips")
    @classmethod
    def _proxies(cls, proxies: tuple[str, ...] | None) -> tuple[str, ...] | None:
        for index, proxy in enumerate(proxies or ()):
            if proxy == "*" or proxy.startswith("unix:"):
                continue
            try:
                ipaddress.ip_network(proxy) if "/" in proxy else ipaddress.ip_address(proxy)
            except ValueError:
                raise rule_error(
                    f"{proxy!r} is not an address or a network (a network's host bits are zero: 10.1.0.0/16); write "
                    "the proxies' addresses, as "
                    'forwarded_allow_ips = ["10.0.0.5", "10.1.0.0/16"], or "*" for any',
                    index,
                ) from None
        return proxies

    @field_validator("cors_origins")
    @classmethod
    def _origins(cls, origins: tuple[str, ...]) -> tuple[str, ...]:
        for index, origin in enumerate(origins):
            reason = _origin_problem(origin)
            if reason is not None:
                raise rule_error(
                    f"{reason}; an origin is a scheme, a host and an optional port, as a browser sends it: "
                    '"https://app.example.com" or "http://localhost:5173"',
                    index,
                )
        return origins


_DEFAULT_PORTS = {"http": 80, "https": 443}


def _origin_problem(origin: str) -> str | None:
    """What keeps `origin` from being an origin a browser sends (None: nothing)."""
    if origin in ("*", "null"):
        return f"{origin!r} is not allowed; list each origin"
    parts = urlsplit(origin)
    if parts.scheme not in _DEFAULT_PORTS or not parts.hostname:
        return f"{origin!r} is not an http:// or https:// origin"
    if parts.path or parts.query or parts.fragment or origin.endswith(("?", "#")):
        return f"{origin!r} goes on past its host and port; remove everything after them"
    if parts.username is not None or parts.password is not None:
        return f"{origin!r} has a user name; remove it"
    try:
        port = parts.port
    except ValueError:
        return f"{origin!r} has an invalid port"
    if port == _DEFAULT_PORTS[parts.scheme] or origin.endswith(":"):
        return f"{origin!r} names its scheme's default port; remove it (browsers leave it out)"
    if origin != origin.lower():
        return f"{origin!r} has capital letters; write it in lowercase, as browsers send it"
    return None


def _file_setting(path: Any, key: str, example: str, off: str) -> Any:
    """A setting that names a file: true (one in the user's state folder), false (`off`) or a path."""
    if path is None or isinstance(path, bool):
        return path
    if not isinstance(path, str) or path == "":
        got = "an empty string" if path == "" else _describe(path)
        raise rule_error(
            f"{key} is true (a file in the user's state folder), false ({off}) or the path of a file, "
            f'like "{example}"; got {got}'
        )
    if path.endswith("/") or Path(path).name in ("", ".", ".."):
        folder = path.rstrip("/") or "."
        raise rule_error(f'{key} names a folder; name a file in it, like "{folder}/{example}"')
    return path


class PolicySettings(BaseModel):
    """The [policy] table: where the policy files are (relative paths: from hub.toml's folder)."""

    model_config = _MODEL_CONFIG

    dir: str | None = Field(default=None, min_length=1)
    """None: no policy; every principal may see and call everything."""
    reload: bool = True
    """Apply edits to the policy files without a restart."""
    pins: bool | str | None = None
    """The tool pins file (fingerprints of approved tool definitions): a path (relative: from hub.toml's folder);
    true: a file of this hub.toml's own in the user's state folder (see state.py); false or None: no pinning."""

    @field_validator("pins", mode="before")
    @classmethod
    def _pins_file(cls, path: Any) -> Any:
        return _file_setting(path, "pins", "pins.json", "no pinning")


class SearchSettings(BaseModel):
    """The [search] table: tool search for big catalogs (see mcp_hub/search/). Off by default."""

    model_config = _MODEL_CONFIG

    enabled: bool = False
    """List a search tool and a call tool (and the `pinned` tools) instead of every tool."""
    ranking: Literal["hybrid", "bm25", "embedding", "wordllama", "minilm"] = "hybrid"
    """How tools are ranked (mcp_hub/search/ranking.py, METHODS): "hybrid", BM25 fused with the embeddings
    installed (the `search-model` extra's sentence model, the `search` extra's wordllama); "wordllama" or
    "minilm", BM25 fused with that one only; what is not installed is left out, down to BM25."""
    results: int = Field(default=5, ge=1, le=50)
    """How many tools a search returns unless the caller asks for fewer or more (at most 50)."""
    pinned: tuple[str, ...] = Field(default=(), strict=False)
    """Globs of public tool names listed as well (`time_*`), for each caller that may see them."""
    search_tool: str = Field(default="search_tools", pattern=r"^[A-Za-z0-9_-]{1,64}$")
    """The name clients see for the search tool."""
    call_tool: str = Field(default="call_tool", pattern=r"^[A-Za-z0-9_-]{1,64}$")
    """The name clients see for the tool that calls a tool the search found."""


class GuardrailsSettings(BaseModel):
    """The [guardrails] table: what the policy's guards' detectors need to know of the hub's surroundings."""

    model_config = _MODEL_CONFIG

    regions: tuple[str, ...] | None = Field(default=None, strict=False)
    """The regions (ISO 3166 codes, "US", "GB", "DE") whose phone numbers the "phone" detector also finds in
    national form (`(650) 253-0000`, `07911 123456`); numbers in international form (`+44 ...`) are found
    whatever this says. None: the locale's country (`locale_regions`); `[]`: international form only."""

    @field_validator("regions")
    @classmethod
    def _regions(cls, regions: tuple[str, ...] | None) -> tuple[str, ...] | None:
        if not regions:
            return regions
        import phonenumbers  # only for a hub.toml that names regions: the detectors load it anyway

        known = phonenumbers.SUPPORTED_REGIONS
        for index, region in enumerate(regions):
            if region.upper() not in known:
                hint = {"UK": "GB", "EN": "GB", "EL": "GR"}.get(region.upper())
                fix = f'write "{hint}"' if hint else 'use a two-letter ISO 3166 country code, like "US", "GB" or "DE"'
                raise rule_error(f"{region!r} is not a region phone numbers are known for; {fix}", index)
        return tuple(dict.fromkeys(region.upper() for region in regions))

    def phone_regions(self, environ: Mapping[str, str]) -> tuple[str, ...]:
        """`regions`, or when unset the locale's country in `environ` (`locale_regions`)."""
        return self.regions if self.regions is not None else locale_regions(environ)


def locale_regions(environ: Mapping[str, str]) -> tuple[str, ...]:
    """The country of the locale, as a region ("en_US.UTF-8" -> "US"), from `LC_ALL`, `LC_TELEPHONE` or
    `LANG`, the first one set (as the C library picks a category's locale); none for "C", "POSIX" or a locale
    without a country."""
    for name in ("LC_ALL", "LC_TELEPHONE", "LANG"):
        value = environ.get(name)
        if value:
            country = _LOCALE_COUNTRY.match(value)
            return (country.group(1).upper(),) if country else ()
    return ()


_LOCALE_COUNTRY = re.compile(r"[A-Za-z]{2,3}_([A-Za-z]{2})(?![A-Za-z])")


class EndpointSettings(BaseModel):
    """An [endpoints.NAME] table: a curated view of the hub, served at `/mcp/NAME` over HTTP and with
    `mcp-hub serve --endpoint NAME` over stdio (see mcp_hub/server/curated.py). What it selects is
    intersected with what each caller's policy profile lets it see."""

    model_config = _MODEL_CONFIG

    servers: tuple[str, ...] | None = Field(default=None, strict=False)
    """The mounts it serves; None: every mount."""
    tools: tuple[str, ...] = Field(default=(), strict=False)
    """Policy selectors (`MOUNT/NAME` globs on the server's own names; `!` in front excludes; checked by
    server/curated.py, which knows the policy's globs). With none that include, every tool of its mounts;
    likewise `prompts` and `resources` (URIs and URI templates)."""
    prompts: tuple[str, ...] = Field(default=(), strict=False)
    """Policy selectors of the prompts it serves (`MOUNT/NAME` globs; `!` excludes); none that include: all."""
    resources: tuple[str, ...] = Field(default=(), strict=False)
    """Policy selectors of the resources and templates it serves (`MOUNT/URI` globs); none that include: all."""
    search: bool | None = None
    """Tool search on this endpoint, whatever `[search] enabled` and the callers' profiles say; None: as they say."""
    instructions: str | None = None
    """What its `initialize` answer tells the client about it (MCP `instructions`)."""
    description: str | None = Field(default=None, min_length=1, max_length=100)
    """What its server card says it does (at most 100 characters); None: a sentence naming the endpoint and the hub."""
    max_result_tokens: int | None = Field(default=None, ge=0)
    """The result budget of its calls, in tokens (see `[results]`); the smaller of this and the caller's
    profile's applies, a policy rule's wins over both; 0: no budget here; None: as `[results]` says."""
    max_list_tokens: int | None = Field(default=None, ge=0)
    """The budget of its `tools/list`, in tokens (see `[results] max_list_tokens`); 0: none here; None: as
    `[results]` says."""


SYSLOG_FACILITIES = (
    "kern", "user", "mail", "daemon", "auth", "syslog", "lpr", "news", "uucp", "cron", "authpriv", "ftp", "ntp",
    "audit", "alert", "clock", "local0", "local1", "local2", "local3", "local4", "local5", "local6", "local7",
)  # fmt: skip
"""RFC 5424's facilities, by their usual names, in code order (kern = 0 ... local7 = 23)."""

_SINK_KEYS: dict[str, tuple[str, ...]] = {
    "file": ("path", "max_bytes", "backups"),
    "syslog": ("address", "tls", "ca", "cert", "key", "server_name", "facility", "app_name"),
    "otlp": ("endpoint", "headers"),
}
"""The keys of an [[audit.sinks]] entry that only one destination takes."""


class AuditSinkSettings(BaseModel):
    """An [[audit.sinks]] entry: one more place every audit event goes, beside `[audit] file`, in a format of its
    own (see docs/audit.md). A sink that is down or slow keeps up to `buffer` events and sends them when it is back
    (oldest dropped beyond that, counted and logged); a call never waits for a sink."""

    model_config = _MODEL_CONFIG

    destination: Literal["file", "syslog", "otlp"]
    """Where the events go: "file" (JSON lines, rotated), "syslog" (RFC 5424 over TCP, octet-counted frames, TLS
    unless `tls = false`) or "otlp" (OpenTelemetry log records over OTLP/HTTP to a collector)."""
    format: Literal["hub", "ocsf"] = "hub"
    """"hub": the audit log's own JSON line; "ocsf": OCSF 1.8.0 API Activity (class_uid 6003) JSON."""
    buffer: int = Field(default=10_000, ge=1)
    """Events kept while the destination is down or behind; beyond it the oldest are dropped, counted and logged."""
    path: str | None = Field(default=None, min_length=1)
    """destination "file": the file (relative: from hub.toml's folder)."""
    max_bytes: int = Field(default=10_000_000, ge=1024)
    """destination "file": the size at which the file is rotated (.1, .2...)."""
    backups: int = Field(default=5, ge=0)
    """destination "file": how many rotated files are kept."""
    address: str | None = None
    """destination "syslog": the receiver, "HOST:PORT" ("[::1]:6514" for an IPv6 address)."""
    tls: bool = True
    """destination "syslog": TLS (RFC 5425), the receiver's certificate verified against `ca`; false: plain TCP
    (RFC 6587), which anyone on the path can read and change: only for a receiver on the same host or network."""
    ca: str | None = Field(default=None, min_length=1)
    """destination "syslog": the CA certificates (PEM) the receiver's certificate is checked against; None: the
    system's."""
    cert: str | None = Field(default=None, min_length=1)
    """destination "syslog": the hub's client certificate (PEM), for a receiver that asks for one (mutual TLS)."""
    key: str | None = Field(default=None, min_length=1)
    """destination "syslog": the private key (PEM) of `cert`; None: in `cert`'s file."""
    server_name: str | None = Field(default=None, min_length=1)
    """destination "syslog": the name the receiver's certificate must carry; None: the host of `address`."""
    facility: str = "authpriv"
    """destination "syslog": the facility of the messages, by its name: kern, user, mail, daemon, auth, syslog, lpr,
    news, uucp, cron, authpriv, ftp, ntp, audit, alert, clock, local0 to local7 (authpriv: security/authorization
    messages, kept apart from other logs by most receivers)."""
    app_name: str = Field(default="mcp-hub", min_length=1, max_length=48, pattern=r"^[!-~]+$")
    """destination "syslog": the APP-NAME of the messages (printable ASCII, no spaces)."""
    endpoint: str | None = None
    """destination "otlp": the collector's OTLP/HTTP base URL ("/v1/logs" is appended); None: `[telemetry]
    endpoint`, else OTEL_EXPORTER_OTLP_(LOGS_)ENDPOINT, else http://localhost:4318."""
    headers: dict[str, str] = Field(default_factory=dict, repr=False)
    """destination "otlp": headers of every export (write secrets as ${VAR}); empty: `[telemetry] headers`."""

    @field_validator("endpoint")
    @classmethod
    def _collector_url(cls, url: str | None) -> str | None:
        return collector_url(url)

    @field_validator("facility")
    @classmethod
    def _facility(cls, facility: str) -> str:
        if facility not in SYSLOG_FACILITIES:
            raise rule_error(f"facility must be one of {', '.join(SYSLOG_FACILITIES)}; got {facility!r}")
        return facility

    @field_validator("address")
    @classmethod
    def _host_port(cls, address: str | None) -> str | None:
        if address is None or address.startswith("${"):
            return address
        try:
            host_port(address)
        except ValueError as exc:
            raise rule_error(str(exc)) from None
        return address

    @model_validator(mode="after")
    def _keys_of_destination(self) -> AuditSinkSettings:
        for destination, keys in _SINK_KEYS.items():
            for key in keys:
                if destination != self.destination and key in self.model_fields_set:
                    raise rule_error(
                        f'{key} applies to destination = "{destination}" only, and this sink\'s destination is '
                        f'"{self.destination}"; remove {key}',
                        key,
                    )
        required = {"file": "path", "syslog": "address"}.get(self.destination)
        if required and getattr(self, required) is None:
            example = {"path": '"audit-ocsf.jsonl"', "address": '"siem.example.com:6514"'}[required]
            raise rule_error(f'destination = "{self.destination}" needs {required}, like {required} = {example}')
        if self.destination == "syslog" and not self.tls:
            for key in ("ca", "cert", "key", "server_name"):
                if getattr(self, key) is not None:
                    raise rule_error(f"{key} is a TLS setting, and tls = false; remove {key}, or tls = false", key)
        if self.key is not None and self.cert is None:
            raise rule_error("key is the private key of cert, and cert is not set; set cert too", "key")
        if self.destination == "otlp" and not _installed(OTLP_EXPORTER):
            raise rule_error(
                'destination = "otlp" needs the OTLP exporter, which is not installed; install it with '
                "pip install -e '.[otlp]' from the checkout",
                "destination",
            )
        return self


def host_port(address: str) -> tuple[str, int]:
    """ "HOST:PORT" (or "[IPv6]:PORT") -> (host, port); a ValueError saying how to write it otherwise."""
    host, colon, port = address.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    elif ":" in host:  # an IPv6 address without its brackets
        host = ""
    if not colon or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(
            f'address must be "HOST:PORT", like "siem.example.com:6514" (or "[::1]:6514"); got {address!r}'
        )
    return host, int(port)


class AuditFileSettings(BaseModel):
    """The [audit] table: the audit log file (relative paths: from hub.toml's folder), and more sinks."""

    model_config = _MODEL_CONFIG

    file: bool | str | None = None
    """The audit log: a path (relative: from hub.toml's folder); true: a file of this hub.toml's own in the user's
    state folder (see state.py); false or None: decisions are not written anywhere."""

    max_bytes: int = Field(default=10_000_000, ge=1024)
    """The size at which the audit log is rotated (audit.jsonl.1, .2...)."""
    backups: int = Field(default=5, ge=0)
    """How many rotated files are kept."""

    sinks: tuple[AuditSinkSettings, ...] = Field(default=(), strict=False)
    """More places the audit events go, each an [[audit.sinks]] table: a file, a syslog receiver or an OTLP
    collector, in the hub's JSON or as OCSF (see docs/audit.md); none: the file alone."""

    @field_validator("file", mode="before")
    @classmethod
    def _audit_file(cls, path: Any) -> Any:
        return _file_setting(path, "file", "audit.jsonl", "no audit log")


class CacheSettings(BaseModel):
    """The [cache] table: results the hub keeps and serves again (see mcp_hub/cache/)."""

    model_config = _MODEL_CONFIG

    enabled: bool = True
    """Keep `resources/read` results for as long as their 2026-07-28 server's `ttlMs` says, and `tools/call`
    results of read-only tools for as long as a policy rule's `cache` says. False: nothing is kept."""
    max_entries: int = Field(default=10_000, ge=1)
    """How many results are kept at most (the least recently used go first)."""
    max_bytes: int = Field(default=67_108_864, ge=1024)
    """How much memory the kept results take at most, as JSON (64 MiB; the least recently used go first)."""
    max_entry_bytes: int = Field(default=1_048_576, ge=1)
    """A result larger than this (as JSON) is not kept."""


class ResultSettings(BaseModel):
    """The [results] table: results sized for the model (see mcp_hub/results/). A result over its budget reaches
    the client cut to fit, with a note of what was cut and a link to the whole, which the hub keeps for the
    principal that received it, readable page by page (`resources/read` of `hub://results/ID`, or the
    `read_result` tool)."""

    model_config = _MODEL_CONFIG

    max_result_tokens: int = Field(default=20_000, ge=0)
    """The hub-wide result budget, in tokens, of a `tools/call` or `resources/read` result; an endpoint, a policy
    profile and a policy rule may set their own (see docs/results.md). 0: no budget (results pass whole)."""
    ttl: _Seconds = 3600.0
    """Seconds a cut result's whole is kept for its principal to read."""
    max_bytes: int = Field(default=268_435_456, ge=1024)
    """How much memory kept results take at most in this process (256 MiB; the least recently used go first);
    with `[cluster]` they live in Redis, bounded by its `maxmemory`."""
    max_image_pixels: int = Field(default=1_150_000, ge=1)
    """An image with more pixels is downscaled to fit (with Pillow installed), else replaced by a link to it."""
    read_tool: str = Field(default="read_result", min_length=1, max_length=128, pattern=r"^[A-Za-z0-9_.-]+$")
    """The name of the tool that reads a kept result page by page, listed while a budget is on."""
    max_list_tokens: int = Field(default=0, ge=0)
    """The budget, in tokens, of the whole `tools/list` the hub's endpoint gives a client (an endpoint may set its
    own): over it, the schemas' property descriptions are trimmed, then the tools' descriptions shortened with a
    visible marker, never dropping a tool (docs/results.md). 0 (the default): lists are served whole, since a
    shortened list changes how well the model calls the tools; tool search (`[search]`) is the way past a cap."""


class ClusterSettings(BaseModel):
    """The [cluster] table: hub replicas sharing rate limits and kept results on Redis (see mcp_hub/cluster.py)."""

    model_config = _MODEL_CONFIG

    redis: str | None = None
    """The Redis URL (redis://, rediss:// or unix://; write a password as ${VAR}). None: nothing is shared."""
    secret: str | None = None
    """What the key sealing parked calls' states is derived from, the same on every replica (write it as
    ${VAR}). None: the first replica stores a random key in Redis for all."""
    advertise: str | None = None
    """The URL of this replica's MCP endpoint as the other replicas reach it (e.g. "http://10.0.0.5:8765/mcp").
    None: the served host, port and path (with a wildcard host, this machine's name)."""

    @field_validator("redis")
    @classmethod
    def _redis_url(cls, url: str | None) -> str | None:
        if url is None or url.startswith("${"):  # checked once expanded
            return url
        if urlsplit(url).scheme not in ("redis", "rediss", "unix"):
            raise rule_error('not a Redis URL; write it like "redis://127.0.0.1:6379/0"')
        return url


OTLP_EXPORTER = "opentelemetry.exporter.otlp.proto.http"
"""The module `"otlp"` needs: the `otlp` extra (`pip install -e '.[otlp]'` from the checkout)."""


class TelemetrySettings(BaseModel):
    """The [telemetry] table: OpenTelemetry traces and metrics.

    Each is "off" (the default), "console" (JSON lines on stderr) or "otlp" (OTLP over
    HTTP to a collector). The standard OTEL_* environment variables fill in what is not set here.
    """

    model_config = _MODEL_CONFIG

    traces: Literal["off", "console", "otlp"] = "off"
    """Where the hub's spans go: nowhere, JSON lines on stderr, or an OTLP/HTTP collector."""
    metrics: Literal["off", "console", "otlp"] = "off"
    """Where the hub's metrics go: nowhere, JSON lines on stderr, or an OTLP/HTTP collector."""
    endpoint: str | None = None
    """The collector's OTLP/HTTP base URL ("/v1/traces" and "/v1/metrics" are appended); None: the
    OTEL_EXPORTER_OTLP_(TRACES_|METRICS_)ENDPOINT variables, else http://localhost:4318."""
    headers: dict[str, str] = Field(default_factory=dict, repr=False)
    """Headers of every OTLP export (write secrets as ${VAR}); empty: OTEL_EXPORTER_OTLP_HEADERS."""
    service_name: str | None = Field(default=None, min_length=1)
    """The `service.name` of everything the hub reports; None: OTEL_SERVICE_NAME, else "mcp-hub"."""
    metric_interval: _Seconds | None = None
    """Seconds between metric exports; None: OTEL_METRIC_EXPORT_INTERVAL (milliseconds), else 60."""

    @field_validator("endpoint")
    @classmethod
    def _collector_url(cls, url: str | None) -> str | None:
        return collector_url(url)

    @model_validator(mode="after")
    def _exporter_installed(self) -> TelemetrySettings:
        for key in ("traces", "metrics"):
            if getattr(self, key) == "otlp" and not _installed(OTLP_EXPORTER):
                raise rule_error(
                    f'{key} = "otlp" needs the OTLP exporter, which is not installed; install it with '
                    f"pip install -e '.[otlp]' from the checkout, or write {key} = \"console\"",
                    key,
                )
        return self


def collector_url(url: str | None) -> str | None:
    """An `endpoint` setting: a collector's http:// or https:// base URL (a ${VAR} is checked once expanded)."""
    if url is None or url.startswith("${"):
        return url
    parts = urlsplit(url)
    if parts.scheme.lower() not in ("http", "https") or not parts.netloc:
        raise rule_error('endpoint must be the collector\'s http:// or https:// base URL, like "http://localhost:4318"')
    return url


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # a parent package is missing
        return False


_LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
_SYMMETRIC_ALGORITHMS = ("HS256", "HS384", "HS512")
ASYMMETRIC_ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA")
"""The JWS algorithms an access token may be signed with: public-key ones only (never `none`, never HMAC,
whose key would be the public key everyone can fetch)."""


def _url_problem(url: str, what: str) -> str | None:
    """Why `url` cannot be `what` (None: it can): https, or http on a loopback host; no fragment."""
    parts = urlsplit(url)
    if parts.scheme not in ("https", "http") or not parts.hostname:
        return f"{what} must be an absolute https:// URL, got {url!r}"
    if parts.scheme == "http" and parts.hostname not in _LOOPBACK_HOSTS:
        return f"{what} must use https:// (http:// only on a loopback address), got {url!r}"
    if parts.fragment or url.endswith("#"):
        return f"{what} must not have a #fragment; remove it"
    return None


def _signature_algorithms(algorithms: tuple[str, ...], what: str) -> tuple[str, ...]:
    """`algorithms` if `what` may be signed with each: public-key algorithms only."""
    if not algorithms:
        raise rule_error(f"no algorithms; list at least one of {', '.join(ASYMMETRIC_ALGORITHMS)}")
    for index, name in enumerate(algorithms):
        if name.lower() == "none" or name in _SYMMETRIC_ALGORITHMS:
            raise rule_error(
                f"{name!r} is never accepted: {what} must be signed with the issuer's private key; "
                f"use one of {', '.join(ASYMMETRIC_ALGORITHMS)}",
                index,
            )
        if name not in ASYMMETRIC_ALGORITHMS:
            raise rule_error(f"unknown algorithm {name!r}; use one of {', '.join(ASYMMETRIC_ALGORITHMS)}", index)
    return algorithms


class OAuthSettings(BaseModel):
    """The [auth.oauth] table: the hub as an OAuth 2.1 resource server (MCP authorization).

    Clients present access tokens issued by `issuer` for `resource`; JWTs are checked against the
    issuer's keys (its JWKS), other tokens through its introspection endpoint (RFC 7662)."""

    model_config = _MODEL_CONFIG

    issuer: str
    """The authorization server's issuer identifier, exactly as its tokens' `iss` claim and its metadata say."""
    resource: str
    """The hub's canonical URI as clients reach it (`https://hub.example.com/mcp`): tokens must name it in
    `aud` (RFC 8707), and the protected resource metadata (RFC 9728) describes it."""
    jwks_uri: str | None = None
    """The issuer's JSON Web Key Set; None: from its metadata (RFC 8414, or OpenID Connect discovery)."""
    algorithms: tuple[str, ...] = Field(default=("RS256", "PS256", "ES256", "EdDSA"), strict=False)
    """The JWT signature algorithms taken (never "none", nor HMAC with a public key)."""
    leeway: int = Field(default=30, ge=0, le=300)
    """Seconds of clock skew allowed on `exp`, `nbf` and `iat`."""
    principal_claim: str = Field(default="sub", min_length=1)
    """The claim that names the principal (the name in the policy's [principals] and in the audit log)."""
    groups_claim: str = Field(default="groups", min_length=1)
    """The claim listing the caller's groups, which the policy's [groups] map to profiles."""
    scopes_required: tuple[str, ...] = Field(default=(), strict=False)
    """Scopes every token must carry; a token without one is answered 403 insufficient_scope."""
    scopes_supported: tuple[str, ...] = Field(default=(), strict=False)
    """Scopes advertised in the protected resource metadata (besides `scopes_required`)."""
    introspection_endpoint: str | None = None
    """RFC 7662 endpoint for tokens that are not JWTs; None: only JWTs are taken."""
    client_id: str | None = None
    """The hub's client id at the introspection endpoint."""
    client_secret: str | None = Field(default=None, repr=False)
    """Its secret (write it as ${VAR})."""
    jwks_refetch_interval: float = Field(default=60.0, ge=1, le=86400, allow_inf_nan=False, strict=False)
    """The least seconds between two fetches of the JWKS for a token whose key id is unknown."""
    jwks_max_age: float = Field(default=3600.0, ge=60, le=7 * 86400, allow_inf_nan=False, strict=False)
    """Seconds the keys are kept before they are fetched again."""
    introspection_max_age: float = Field(default=300.0, gt=0, le=86400, allow_inf_nan=False, strict=False)
    """The longest an introspection answer is kept (never longer than the token lives)."""
    resource_name: str = "mcp-hub"
    """The human-readable name in the protected resource metadata (`resource_name`)."""
    dpop: Literal["allow", "require"] = "allow"
    """DPoP-bound tokens (RFC 9449): "allow" takes `Authorization: DPoP TOKEN` with a proof of the key the token
    is bound to, and Bearer tokens that are bound to no key (a bound token sent as Bearer is always refused);
    "require" takes DPoP-bound tokens only, and the protected resource metadata says so
    (`dpop_bound_access_tokens_required`). API keys are not tokens and stay as they are."""
    dpop_algorithms: tuple[str, ...] = Field(default=("ES256", "PS256", "RS256", "EdDSA"), strict=False)
    """The algorithms a DPoP proof may be signed with (advertised as `dpop_signing_alg_values_supported`)."""
    dpop_proof_age: int = Field(default=300, ge=10, le=3600)
    """Seconds a DPoP proof is taken after its `iat` (plus `leeway`); each proof's `jti` is remembered that long
    and a proof presented twice is refused (shared between replicas in Redis with [cluster])."""

    @field_validator("issuer", "resource", "jwks_uri", "introspection_endpoint")
    @classmethod
    def _urls(cls, url: str | None, info: Any) -> str | None:
        if url is not None and not url.startswith("${"):
            problem = _url_problem(url, info.field_name)
            if problem is not None:
                raise rule_error(problem)
        return url

    @field_validator("algorithms", "dpop_algorithms")
    @classmethod
    def _algorithms(cls, algorithms: tuple[str, ...]) -> tuple[str, ...]:
        return _signature_algorithms(algorithms, "an access token")

    @model_validator(mode="after")
    def _introspection_client(self) -> OAuthSettings:
        if self.introspection_endpoint is not None and (self.client_id is None or self.client_secret is None):
            raise rule_error(
                "introspection_endpoint needs the hub's client_id and client_secret at the authorization "
                'server; add them (client_secret = "${HUB_INTROSPECTION_SECRET}")',
                "client_id" if self.client_id is None else "client_secret",
            )
        if self.introspection_endpoint is None:
            for key in ("client_id", "client_secret"):
                if key in self.model_fields_set:
                    raise rule_error(f"{key} is only used with introspection_endpoint; add it, or remove {key}", key)
        return self


class AuthSettings(BaseModel):
    """The [auth] table: who HTTP clients are."""

    model_config = _MODEL_CONFIG

    oauth: OAuthSettings | None = None
    """[auth.oauth]: OAuth access tokens, beside the API keys."""

    api_keys: dict[str, str] = Field(default_factory=dict, repr=False)
    """Principal name -> its API key (write keys as ${VAR}). When set, HTTP clients must
    present one (`Authorization: Bearer KEY` or `X-API-Key: KEY`) and act as its principal."""

    @field_validator("api_keys")
    @classmethod
    def _usable_keys(cls, keys: dict[str, str]) -> dict[str, str]:
        for name, key in keys.items():
            if not key.startswith("${") and len(key) < 16:
                raise rule_error("an API key must be at least 16 characters; generate a longer one", name)
        return keys


ADMIN_SSO_CALLBACK = "/sso/callback"
"""Where the identity provider sends an administrator's browser back, below the console (`/admin/sso/callback`)."""
ADMIN_LOGIN = "/login"
"""The console's sign-in page (`/admin/login`), where the identity provider sends a browser it signed out."""


class AdminOidc(BaseModel):
    """The [admin.oidc] table: administrators sign in to the console through the organisation's identity provider
    (OpenID Connect authorization code with PKCE; see mcp_hub/admin/sso.py). Admin keys stay, for break-glass use."""

    model_config = _MODEL_CONFIG

    issuer: str
    """The identity provider's issuer, exactly as its metadata (`/.well-known/openid-configuration`) and its ID
    tokens' `iss` say."""
    client_id: str = Field(min_length=1)
    """The console's client id at the identity provider (registered there with the redirect URI below)."""
    client_secret: str | None = Field(default=None, min_length=1, repr=False)
    """Its secret, written as ${VAR}; unset: a public client (PKCE only, `token_endpoint_auth_method = "none"`)."""
    token_endpoint_auth_method: Literal["client_secret_basic", "client_secret_post", "none"] | None = None
    """How the console authenticates at the token endpoint; unset: client_secret_basic with a secret, else none."""
    scopes: tuple[str, ...] = Field(default=("openid", "email", "profile"), strict=False)
    """The scopes asked for: `openid` and those that bring the claims below (some providers need a `groups` scope)."""
    redirect_uri: str | None = None
    """Where the identity provider sends the browser back: the console's own `/admin/sso/callback` as the browser
    reaches it (`https://hub.example.com/admin/sso/callback`); unset: made from the URL the console was opened at
    (set it behind a proxy that changes the scheme or the host)."""
    admin_claim: str = Field(min_length=1)
    """The claim that makes an administrator (`groups`, `roles`, `realm_access.roles`: a dotted name reaches into
    a nested claim when no claim has the whole name), read from the ID token and the userinfo answer."""
    admin_values: tuple[str, ...] = Field(strict=False)
    """An administrator's `admin_claim` holds one of these (a list claim: contains one; a string claim: is one)."""
    algorithms: tuple[str, ...] = Field(default=("RS256", "PS256", "ES256", "EdDSA"), strict=False)
    """The ID token signature algorithms taken (public-key ones only: never "none", nor HMAC)."""
    leeway: int = Field(default=60, ge=0, le=300)
    """Seconds of clock skew allowed on the ID token's `exp` and `iat`."""
    label: str = Field(default="your organisation's sign-in", min_length=1)
    """What the sign-in button names: "Sign in with {label}"."""
    recheck_minutes: float = Field(default=10.0, gt=0, le=24 * 60, allow_inf_nan=False, strict=False)
    """How long the console takes a signed-in person's word: once their session was last vouched for longer ago,
    the next request asks the identity provider again (the refresh token renewed, or the userinfo endpoint asked
    with the access token), and ends the session if they are no longer an administrator, the provider refuses, or
    it cannot be asked. The whole session lasts `[admin] session_hours` at most."""
    provider_sign_out: bool = True
    """Signing out of the console signs the person out of the identity provider too, where its metadata offers
    `end_session_endpoint` (OpenID Connect RP-Initiated Logout 1.0: the browser is sent there with the ID token as
    `id_token_hint`, and back to the console's sign-in page). false: the console's session alone ends, and the next
    sign-in may pass without a password at the identity provider."""
    post_logout_redirect_uri: str | None = None
    """Where the identity provider sends the browser after signing the person out: the console's own `/admin/login`
    as the browser reaches it, registered at the identity provider as a post-logout redirect URI; unset: made from
    the URL the console was opened at (set it behind a proxy that changes the scheme or the host)."""

    @field_validator("issuer", "redirect_uri", "post_logout_redirect_uri")
    @classmethod
    def _urls(cls, url: str | None, info: Any) -> str | None:
        if url is not None and not url.startswith("${"):
            problem = _url_problem(url, info.field_name)
            if problem is not None:
                raise rule_error(problem)
        return url

    @field_validator("post_logout_redirect_uri")
    @classmethod
    def _sign_in_page(cls, url: str | None) -> str | None:
        if url is not None and not url.startswith("${") and not urlsplit(url).path.endswith(ADMIN_LOGIN):
            raise rule_error(
                f"the post-logout redirect URI is the console's sign-in page (https://HOST/admin{ADMIN_LOGIN}), "
                f"got {url!r}"
            )
        return url

    @field_validator("redirect_uri")
    @classmethod
    def _callback(cls, url: str | None) -> str | None:
        if url is not None and not url.startswith("${") and not urlsplit(url).path.endswith(ADMIN_SSO_CALLBACK):
            raise rule_error(
                f"the redirect URI is the console's {ADMIN_SSO_CALLBACK} (https://HOST/admin{ADMIN_SSO_CALLBACK}), "
                f"got {url!r}"
            )
        return url

    @field_validator("scopes")
    @classmethod
    def _openid(cls, scopes: tuple[str, ...]) -> tuple[str, ...]:
        if "openid" not in scopes:
            raise rule_error('OpenID Connect needs the scope "openid"; add it: scopes = ["openid", "email", "profile"]')
        return scopes

    @field_validator("admin_values")
    @classmethod
    def _someone(cls, values: tuple[str, ...]) -> tuple[str, ...]:
        if not values or any(not value for value in values):
            raise rule_error('name the values that make an administrator: admin_values = ["mcp-admins"]')
        return values

    @field_validator("algorithms")
    @classmethod
    def _algorithms(cls, algorithms: tuple[str, ...]) -> tuple[str, ...]:
        return _signature_algorithms(algorithms, "an ID token")

    @model_validator(mode="after")
    def _client_authentication(self) -> AdminOidc:
        if self.token_endpoint_auth_method in ("client_secret_basic", "client_secret_post") and not self.client_secret:
            raise rule_error(
                f'{self.token_endpoint_auth_method} needs client_secret = "${{CONSOLE_OIDC_SECRET}}"; add it, or use '
                '"none" for a public client',
                "client_secret",
            )
        return self


class AdminSettings(BaseModel):
    """The [admin] table: the web console at `/admin` (see mcp_hub/admin/), off unless `enabled`."""

    model_config = _MODEL_CONFIG

    enabled: bool = False
    """Serve the console at `/admin` on the HTTP endpoint (it needs an administrator: a key in `keys`, or
    single sign-on in [admin.oidc])."""
    oidc: AdminOidc | None = None
    """[admin.oidc]: single sign-on through the organisation's identity provider, beside the keys."""
    keys: dict[str, str] = Field(default_factory=dict, repr=False)
    """Administrator name -> the key that administrator logs in with (write keys as ${VAR}). Applies on a live
    reload: the console's sessions signed in with a key removed or changed end (see mcp_hub/admin/sessions.py)."""
    session_hours: float = Field(default=8.0, gt=0, le=24 * 30, allow_inf_nan=False, strict=False)
    """How long a login lasts."""
    dashboard: bool = True
    """The console's dashboard (overview, and pages per mount, tool and principal): calls, errors and latency of
    the last hour, read in-process from the hub's own metrics (which this turns on, exported or not as
    `[telemetry] metrics` says; their cost on the call path is measured in benchmarks/dashboard.py). With
    `[cluster]`, the sum over the replicas. False: no dashboard, and no metrics unless `[telemetry]` asks."""

    @field_validator("keys")
    @classmethod
    def _usable_keys(cls, keys: dict[str, str]) -> dict[str, str]:
        for name, key in keys.items():
            if not key.startswith("${") and len(key) < 16:
                raise rule_error("an admin key must be at least 16 characters; generate a longer one", name)
        return keys

    @model_validator(mode="after")
    def _someone_can_log_in(self) -> AdminSettings:
        if self.enabled and not self.keys and self.oidc is None:
            raise rule_error(
                'the console needs an administrator: add keys = { NAME = "${ADMIN_KEY}" }, or single sign-on in '
                "[admin.oidc]",
                "keys",
            )
        return self


AUTH_MODES = ("static", "client_credentials", "token_exchange", "authorization_code", "user", "enterprise", "workload")
"""How the hub proves itself to a remote server (see `ServerAuth`)."""


USER_CALLBACK_PATH = "/oauth/callback"
CLIENT_DOCUMENT_PATH = "/oauth/client-metadata.json"
"""Where the hub serves its client ID metadata document, beside `USER_CALLBACK_PATH` (credentials/registration.py)."""
"""Where the hub's HTTP server takes the authorization code of a person's login (mode = "user")."""


ENTERPRISE_KEYS = (
    "idp_issuer",
    "idp_token_url",
    "idp_client_id",
    "idp_client_secret",
    "id_token",
    "subject_token_type",
)
"""The keys of a server's auth table that only mode = "enterprise" reads."""
WORKLOAD_KEYS = ("assertion", "assertion_file")
"""The keys of a server's auth table that only mode = "workload" reads."""
PRIVATE_KEY_JWT_MODES = ("client_credentials", "token_exchange", "enterprise", "workload")
"""The modes whose token requests may authenticate the hub with a signed JWT (token_endpoint_auth_method
"private_key_jwt")."""


def signing_algorithm(pem: str) -> str:
    """The JWS algorithm a private key (PEM) signs with: ES256/ES384/ES512 for EC P-256/P-384/P-521, RS256 for
    RSA, EdDSA for Ed25519.

    Raises:
        ValueError: not a PEM private key, or one of another kind (a message for a person).
    """
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
    from cryptography.hazmat.primitives.serialization import load_pem_private_key

    try:
        key = load_pem_private_key(pem.encode(), password=None)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"not an unencrypted PEM private key ({exc})") from None
    if isinstance(key, rsa.RSAPrivateKey):
        return "RS256"
    if isinstance(key, ed25519.Ed25519PrivateKey):
        return "EdDSA"
    if isinstance(key, ec.EllipticCurvePrivateKey):
        found = {"secp256r1": "ES256", "secp384r1": "ES384", "secp521r1": "ES512"}.get(key.curve.name)
        if found is not None:
            return found
    raise ValueError("an EC (P-256, P-384, P-521), RSA or Ed25519 key is needed")


class ServerAuth(BaseModel):
    """A remote server's [servers.NAME.auth] table: the credential the hub presents to it (see
    mcp_hub/credentials/). Never the hub's own client's: that one stops at the hub."""

    model_config = _MODEL_CONFIG

    mode: str = "static"
    """"static": only the server's `headers`; "client_credentials": a token the hub fetches for itself at
    the authorization server; "token_exchange": the caller's token exchanged there for one meant for this
    server (RFC 8693); "authorization_code": the hub logs in to the server's authorization server itself
    (MCP authorization discovery, registration, PKCE), with an authorization server that approves without a
    person; "user": each person signs in to the server's authorization server themself (authorization code
    with PKCE; the hub as a pre-registered client, or by its client ID metadata document, or registered
    dynamically), and their calls carry their own token; "enterprise":
    enterprise-managed authorization (the ID-JAG extension): each person's identity assertion from the
    organisation's identity provider exchanged there for an ID-JAG (RFC 8693), presented to the server's
    authorization server with the JWT bearer grant (RFC 7523) for their token, with no consent server by
    server; "workload": the hub's own token by the JWT bearer grant (RFC 7523) with its workload's identity
    token (workload identity federation: a Kubernetes service account token, a cloud's instance identity)."""
    issuer: str | None = None
    """The authorization server; its token endpoint is found in its metadata (RFC 8414). Unset (and no
    `token_url`): the first one the server's protected resource metadata names (RFC 9728)."""
    token_url: str | None = None
    """The token endpoint, when it is not to be discovered from `issuer`."""
    client_id: str | None = Field(default=None, min_length=1)
    """The hub's client id at the authorization server. user: optional; unset, the hub's client ID metadata
    document where the authorization server takes them, else a client it registers there (RFC 7591)."""
    client_secret: str | None = Field(default=None, min_length=1, repr=False)
    """Write it as ${VAR}."""
    token_endpoint_auth_method: (
        Literal["client_secret_basic", "client_secret_post", "private_key_jwt", "none"] | None
    ) = None
    """How the client authenticates at the token endpoint; unset: client_secret_basic with a secret,
    private_key_jwt with a client_key, else none. private_key_jwt (RFC 7523 section 2.2): a JWT signed with
    `client_key`, whose audience is the authorization server's issuer."""
    client_key: str | None = Field(default=None, min_length=1, repr=False)
    """private_key_jwt: the hub's private key, PEM (write it as ${VAR}); EC P-256/P-384/P-521 signs ES256/384/512,
    RSA RS256, Ed25519 EdDSA. Its public key is registered with the authorization server."""
    assertion: str | None = Field(default=None, min_length=1, repr=False)
    """workload: the workload's identity token (a JWT whose audience is the authorization server), as
    ${VAR}."""
    assertion_file: str | None = Field(default=None, min_length=1)
    """workload: a file holding it, read again at each token request (a projected token that is rotated)."""
    scope: str | None = Field(default=None, min_length=1)
    """Space-separated scopes to ask for."""
    resource: str | None = Field(default=None, min_length=1)
    """The resource indicator sent with token requests (RFC 8707); unset: the server's url."""
    audience: str | None = Field(default=None, min_length=1)
    """The audience asked for in a token exchange (RFC 8693)."""
    redirect_uri: str = "http://127.0.0.1/callback"
    """authorization_code: where the authorization server sends the code; the hub reads it off the redirect.
    user: the hub's own `/oauth/callback`, as the person's browser reaches it (`https://hub.example.com/oauth/callback`)."""
    client_metadata_url: str | None = None
    """authorization_code, user: the hub's client ID metadata document (an https URL), used where the
    authorization server supports them, instead of dynamic registration; at the hub's own
    /oauth/client-metadata.json, the hub serves it. user: unset, the hub serves its own beside its callback (the
    redirect_uri with /oauth/callback replaced by /oauth/client-metadata.json)."""
    token_key: str | None = Field(default=None, min_length=1, repr=False)
    """user, enterprise: the Fernet key the people's tokens are encrypted with at rest (write it as ${VAR}; make
    one with `mcp-hub connections key`)."""
    token_store: str | None = Field(default=None, min_length=1)
    """user, enterprise: the file the people's tokens are kept in; unset: `connections` in the hub's state
    folder."""
    idp_issuer: str | None = None
    """enterprise: the organisation's identity provider, whose token endpoint is found in its metadata (RFC
    8414 or OpenID Connect discovery)."""
    idp_token_url: str | None = None
    """enterprise: the identity provider's token endpoint, when it is not to be discovered from `idp_issuer`."""
    idp_client_id: str | None = Field(default=None, min_length=1)
    """enterprise: the hub's client id at the identity provider."""
    idp_client_secret: str | None = Field(default=None, min_length=1, repr=False)
    """enterprise: the hub's client secret at the identity provider (write it as ${VAR}); unset: a public
    client (token_endpoint_auth_method "none")."""
    id_token: str | None = Field(default=None, min_length=1, repr=False)
    """enterprise: the identity assertion of the one person this hub acts for (write it as ${VAR}); unset:
    each caller's own token, the one they signed in to the hub with (so the hub's `[auth]` must accept the
    identity provider's tokens), and the mount is served per client."""
    subject_token_type: Literal["id_token", "saml2", "access_token"] | None = None
    """enterprise: what the identity assertion is, as the token exchange names it
    (urn:ietf:params:oauth:token-type:...): an OpenID Connect ID token, a SAML 2.0 assertion, or an access token
    of the identity provider. Unset: "id_token" for a configured `id_token`, "access_token" for each caller's
    own token (an MCP client signs in to the hub with an access token)."""
    dpop: Literal["auto", "always", "never"] = "auto"
    """DPoP-bound tokens (RFC 9449): "auto" where the authorization server's metadata lists
    `dpop_signing_alg_values_supported` and the server's protected resource metadata says it takes them (a
    token bound to a key the hub holds, each request with a fresh proof of it); "always" even where they do
    not say; "never": Bearer tokens only."""

    @property
    def per_caller(self) -> bool:
        """Whether each client's session presents its own caller's credential (the mount is served per client)."""
        return self.mode in ("token_exchange", "user") or (self.mode == "enterprise" and self.id_token is None)

    @field_validator("mode")
    @classmethod
    def _known_mode(cls, mode: str) -> str:
        if mode not in AUTH_MODES:
            close = difflib.get_close_matches(mode, AUTH_MODES, n=1)
            hint = f'did you mean "{close[0]}"?' if close else "write one of " + ", ".join(f'"{m}"' for m in AUTH_MODES)
            raise rule_error(f"unknown mode {mode!r}; {hint}")
        return mode

    @field_validator("issuer", "token_url", "redirect_uri", "client_metadata_url", "idp_issuer", "idp_token_url")
    @classmethod
    def _http_urls(cls, url: str | None) -> str | None:
        if url is None or url.startswith("${"):
            return url
        parts = urlsplit(url)
        if parts.scheme.lower() not in ("http", "https") or not parts.netloc:
            raise rule_error('must be an http:// or https:// address, like "https://login.example.com"; fix it')
        return url

    @model_validator(mode="after")
    def _complete(self) -> ServerAuth:
        given = self.model_fields_set - {"mode"}
        needs: tuple[str, ...] = ()
        if self.mode in ("client_credentials", "token_exchange"):
            needs = ("client_id",)
        if self.mode == "user":
            needs = ("token_key",)
        if self.mode == "enterprise":
            needs = ("client_id", "token_key", "idp_client_id")
            if self.idp_issuer is None and self.idp_token_url is None:
                raise rule_error(
                    'mode = "enterprise" needs the identity provider: add idp_issuer = "https://idp.example.com" '
                    '(or idp_token_url = "https://idp.example.com/token")',
                    "idp_issuer",
                )
        for key in ("token_key", "token_store"):
            if self.mode not in ("user", "enterprise") and key in given:
                raise rule_error(f'{key} only applies to mode = "user" or "enterprise"; remove it', key)
        for key in ENTERPRISE_KEYS:
            if self.mode != "enterprise" and key in given:
                raise rule_error(f'{key} only applies to mode = "enterprise"; remove it', key)
        for key in WORKLOAD_KEYS:
            if self.mode != "workload" and key in given:
                raise rule_error(f'{key} only applies to mode = "workload"; remove it', key)
        if self.mode == "workload":
            needs = ("client_id",)
            if (self.assertion is None) == (self.assertion_file is None):
                raise rule_error(
                    'mode = "workload" needs the workload\'s token: add assertion = "${WORKLOAD_TOKEN}" or '
                    'assertion_file = "/var/run/secrets/tokens/mcp" (one of them)',
                    "assertion",
                )
        signs = self.token_endpoint_auth_method == "private_key_jwt" or (
            self.token_endpoint_auth_method is None and self.client_key is not None
        )
        if signs and self.mode not in PRIVATE_KEY_JWT_MODES:
            raise rule_error(
                f"private_key_jwt applies to mode = {', '.join(repr(m) for m in PRIVATE_KEY_JWT_MODES)}; not to "
                f'"{self.mode}"',
                "token_endpoint_auth_method",
            )
        if signs and self.client_key is None:
            raise rule_error('private_key_jwt needs client_key; add client_key = "${CLIENT_KEY_PEM}"', "client_key")
        if self.client_key is not None and not signs:
            raise rule_error(
                'client_key is for token_endpoint_auth_method = "private_key_jwt"; remove one of them', "client_key"
            )
        if signs and self.client_key is not None and not self.client_key.startswith("${"):
            try:
                signing_algorithm(self.client_key)
            except ValueError as exc:
                raise rule_error(f"client_key: {exc}", "client_key") from None
        for key in needs:
            if getattr(self, key) is None:
                raise rule_error(f'mode = "{self.mode}" needs {key}; add {key} = "..."', key)
        if self.mode == "static" and given:
            key = sorted(given)[0]
            raise rule_error(
                f'{key} does not apply to mode = "static" (the server\'s headers are its credential); remove it, '
                'or choose mode = "client_credentials"',
                key,
            )
        if self.mode == "user" and "redirect_uri" not in given:
            raise rule_error(
                'mode = "user" needs redirect_uri, the hub\'s /oauth/callback as a browser reaches it; add '
                'redirect_uri = "https://hub.example.com/oauth/callback"',
                "redirect_uri",
            )
        if (
            self.mode == "user"
            and not self.redirect_uri.startswith("${")
            and not urlsplit(self.redirect_uri).path.endswith(USER_CALLBACK_PATH)
        ):
            raise rule_error(
                f"redirect_uri must end with {USER_CALLBACK_PATH}, where the hub reads the code", "redirect_uri"
            )
        if self.mode in ("user", "enterprise") and self.token_key is not None and not self.token_key.startswith("${"):
            from cryptography.fernet import Fernet

            try:
                Fernet(self.token_key)
            except (ValueError, TypeError):
                raise rule_error(
                    "token_key is not a Fernet key (32 url-safe base64-encoded bytes); make one with "
                    "`mcp-hub connections key`",
                    "token_key",
                ) from None
        public = self.token_endpoint_auth_method == "none"
        if self.mode == "client_credentials" and self.client_secret is None and not public and not signs:
            raise rule_error(
                'mode = "client_credentials" needs client_secret; add client_secret = "${VAR}"', "client_secret"
            )
        return self


_ANNOTATION_KEYS = {
    "title": str,
    "readOnlyHint": bool,
    "destructiveHint": bool,
    "idempotentHint": bool,
    "openWorldHint": bool,
}
"""The tool annotations of the MCP spec, and what each one's value is."""


class ToolOverride(BaseModel):
    """One [servers.NAME.tools.TOOL] table: what a model reads of the server's tool TOOL, set by the hub's
    administrator (see mcp_hub/catalog/overrides.py)."""

    model_config = _MODEL_CONFIG

    title: str | None = None
    """The title clients see instead of the server's."""
    description: str | None = None
    """The description clients (and the model) read instead of the server's."""
    annotations: dict[str, Any] = Field(default_factory=dict)
    """Merged over the server's own annotations."""
    arguments: dict[str, Any] = Field(default_factory=dict)
    """Arguments fixed to a value: left out of the tool's input schema, added to every call of it."""

    @field_validator("annotations")
    @classmethod
    def _known_annotations(cls, annotations: dict[str, Any]) -> dict[str, Any]:
        for key, value in annotations.items():
            kind = _ANNOTATION_KEYS.get(key)
            if kind is None:
                raise rule_error(unknown_key_reason(key, tuple(_ANNOTATION_KEYS)), key)
            if not isinstance(value, kind) or (kind is str and isinstance(value, bool)):
                what = "true or false" if kind is bool else "a string"
                raise rule_error(f"{key} must be {what}, not {_describe(value)}", key)
        return annotations

    @field_validator("arguments")
    @classmethod
    def _json_values(cls, arguments: dict[str, Any]) -> dict[str, Any]:
        for key, value in arguments.items():
            if not _is_json(value):
                raise rule_error(
                    "a fixed argument is sent as JSON, which has no dates or times; write it as a string", key
                )
        return arguments


def _is_json(value: Any) -> bool:
    """Whether a TOML value is also a JSON value (TOML has dates and times, JSON has not)."""
    if isinstance(value, dict):
        return all(_is_json(item) for item in value.values())
    if isinstance(value, list):
        return all(_is_json(item) for item in value)
    return value is None or isinstance(value, (str, int, float, bool))


SANDBOX_PROFILES = ("standard", "network", "off")
"""The sandbox profiles a stdio server may be given (see mcp_hub/upstream/sandbox.py for what each allows)."""


class SandboxSettings(BaseModel):
    """The [sandbox] table (what every stdio server gets) and a server's own `sandbox` (a profile's name, or a
    table of these keys over the hub-wide ones): what a stdio server may see, reach and use (Linux, bubblewrap;
    see README, "Sandbox")."""

    model_config = _MODEL_CONFIG

    profile: Literal["standard", "network", "off"] | None = None
    """"standard": the system read-only, a private empty home and /tmp, no network, limits on memory and processes;
    "network": the same with the network; "off": no sandbox. Unset in [sandbox]: no sandbox (as "off"); unset in
    a server's table: the hub-wide profile, or "standard"."""
    read: tuple[str, ...] = Field(default=(), strict=False)
    """Folders or files the server may read (absolute paths or ~/...); the hub-wide list and the server's add up."""
    write: tuple[str, ...] = Field(default=(), strict=False)
    """Folders or files the server may read and write."""
    network: Literal["none", "any"] | None = None
    """"none": a network of its own with only its own loopback (no connection out, none to this machine's
    services); "any": this machine's network. Unset: the profile's."""
    memory: ByteSize | None = None
    """The most memory its processes may use together ("512MiB", "2GiB"; a number is bytes); past it, the
    kernel kills it. Unset: the profile's (1 GiB). Needs a writable cgroup (see README, "Sandbox")."""
    processes: int | None = Field(default=None, ge=1)
    """The most processes and threads it may run at once (256 in the profiles). Needs a writable cgroup."""
    cpu_seconds: int | None = Field(default=None, ge=1)
    """The CPU time its process may use in all before it is killed (unset: no limit; servers run for days)."""
    file_size: ByteSize | None = None
    """The largest file it may write (1 GiB in the profiles)."""
    open_files: int | None = Field(default=None, ge=16)
    """The most files it may have open at once (4096 in the profiles)."""
    required: bool | None = None
    """In [sandbox]: true, a stdio server does not start where the sandbox cannot be set up (bubblewrap missing);
    false (the default), it runs unconfined there, with a warning in the log, `check` and /healthz. A server
    whose own table asks for a sandbox never runs without one."""

    @field_validator("read", "write")
    @classmethod
    def _absolute_paths(cls, paths: tuple[str, ...]) -> tuple[str, ...]:
        for index, path in enumerate(paths):
            if not (path.startswith(("/", "~", "${"))):
                raise rule_error(
                    f"{path!r} is not an absolute path; write the full path, like '/srv/data' or '~/notes'", index
                )
            if "\x00" in path:
                raise rule_error("a path cannot contain a NUL character", index)
            if os.path.normpath(path) == "/":
                raise rule_error('"/" is the whole filesystem; name the folders, or write sandbox = "off"', index)
        return paths


def effective_sandbox(hub: SandboxSettings, own: SandboxSettings | None) -> SandboxSettings | None:
    """A stdio server's sandbox: its own table's keys over the hub-wide ones (`read` and `write` add up), with
    `required` true where it asked for one itself; None where neither asks for one."""
    if own is None:
        if hub.profile in (None, "off"):
            return None
        return hub.model_copy(update={"required": bool(hub.required)})
    profile = own.profile or hub.profile or "standard"
    if profile == "off":
        return SandboxSettings(profile="off")
    keys = ("network", "memory", "processes", "cpu_seconds", "file_size", "open_files")
    values = {key: getattr(own if key in own.model_fields_set else hub, key) for key in keys}
    return SandboxSettings(
        profile=profile,
        read=tuple(dict.fromkeys((*hub.read, *own.read))),
        write=tuple(dict.fromkeys((*hub.write, *own.write))),
        required=True,
        **values,
    )


def _sandbox_table(value: Any) -> Any:
    """A server's `sandbox = "NAME"` as the table `{profile = "NAME"}`."""
    if isinstance(value, str):
        if value not in SANDBOX_PROFILES:
            raise rule_error(
                f"unknown sandbox profile {value!r}; write one of {', '.join(map(repr, SANDBOX_PROFILES))}, or a "
                'table such as { profile = "standard", write = ["~/notes"] }'
            )
        return {"profile": value}
    return value


class SkillsSettings(BaseModel):
    """The [skills] table: a folder of Agent Skills (SEP-2640) the hub serves itself, for skills a team writes for its
    own tool set. Unset `folder`: none (skills come only from the servers that publish them)."""

    model_config = _MODEL_CONFIG

    folder: str | None = Field(default=None, min_length=1)
    """The folder whose subfolders holding a SKILL.md are skills (relative: to this hub.toml's folder). One folder:
    folders nested in it give nested skill paths (`acme/billing/refunds` -> `skill://MOUNT/acme/billing/refunds`)."""
    mount: str = "skills"
    """The name its skills are mounted under, as a server's ([servers.NAME] must not use it):
    `skill://skills/deploy/SKILL.md`, and `skills/skill://deploy/*` in policy rules and endpoint selectors."""

    def server(self, config_path: str, hub_sandbox: SandboxSettings) -> ServerConfig | None:
        """The mount that serves the folder: `mcp-hub-skills` as a stdio child (None: no folder), in the sandbox
        ("standard", no network) with only the folder to read besides its own program, or unconfined with a
        warning where no sandbox can be set up and [sandbox] does not require one."""
        if self.folder is None:
            return None
        folder = os.path.normpath(Path(config_path).parent.absolute() / Path(self.folder).expanduser())
        if not os.path.isdir(folder):
            raise rule_error(
                f"{folder} is not a folder; create it (each skill a subfolder with a SKILL.md), or name the folder "
                "that holds your skills (a relative path is from this hub.toml's folder)",
                *("skills", "folder"),
            )
        sandbox = SandboxSettings(
            profile="standard", read=(folder,), network="none", required=bool(hub_sandbox.required)
        )
        return ServerConfig(
            name=self.mount,
            command="mcp-hub-skills",
            args=("--name", self.mount, folder),
            sandbox=sandbox,
        )

    @field_validator("mount")
    @classmethod
    def _mount_name(cls, mount: str) -> str:
        if not MOUNT_NAME_PATTERN.match(mount):
            raise rule_error(
                f"invalid mount name {mount!r}: a name starts with a lowercase letter and has at most 32 lowercase "
                f"letters, digits and hyphens; write mount = {to_mount_name(mount)!r}"
            )
        return mount


class ServerConfig(BaseModel):
    """One [servers.NAME] table: a stdio child process (`command`) or a remote server (`url`)."""

    model_config = _MODEL_CONFIG

    name: str
    command: str | None = Field(default=None, min_length=1)
    """A stdio server's program: a bare name is looked up beside the hub's Python first, then on PATH."""
    args: tuple[str, ...] = Field(default=(), strict=False)
    """Its arguments."""
    env: dict[str, str] = Field(default_factory=dict, repr=False)
    """Variables added to its environment (write secrets as ${VAR})."""
    cwd: str | None = Field(default=None, min_length=1)
    """The folder it starts in; unset: the hub's."""
    url: str | None = None
    """A remote server's MCP endpoint (http or https)."""
    transport: Literal["auto", "streamable-http", "http", "sse"] | None = None
    """How a remote server is reached. Unset or "auto": streamable HTTP, or legacy SSE if the server refuses
    it with a 4xx (the MCP spec's backwards compatibility); "http" is "streamable-http"."""
    headers: dict[str, str] = Field(default_factory=dict, repr=False)
    """Headers sent with every request to a remote server (write secrets as ${VAR})."""
    auth: ServerAuth = Field(default_factory=ServerAuth)
    """The credential the hub presents to a remote server ([servers.NAME.auth])."""
    timeout: _Seconds = 60.0
    """Seconds one request may take before the client gets an error; also the longest a call waits for the
    server to start or restart."""
    connect_timeout: _Seconds = 30.0
    """Seconds to start, connect and list."""
    enabled: bool = True
    """False: the server is not mounted (a live reload mounts it when set back)."""
    prefix: bool = True
    """False: its names are not prefixed by the mount (only when it is the only enabled server)."""
    protocol: Literal["auto", "legacy", "2026-07-28"] = "auto"
    """The protocol era spoken to it: "auto" tries 2026-07-28 and falls back to the `initialize` handshake, and
    over streamable HTTP sends each client's requests in that client's own era where the server offers it, or,
    with `era_probe`, a handshake-era client's in the era that measured cheaper for the server."""
    era_probe: bool = True
    """With `protocol = "auto"` over streamable HTTP: as each connection comes up, time a side-effect-free probe
    (`tools/call` of a tool named "mcp-hub-era-probe", answered "unknown tool") in both eras, and send handshake-era
    clients' requests in 2026-07-28 (bridged) where that measured as cheap, else in their own era. False: always
    their own era, for a server that should not see the probe or must keep one era per client."""
    isolation: Literal["shared", "per-client"] = "shared"
    """"per-client": each client (principal) gets its own session (its own process, for stdio)."""
    idle_timeout: _Seconds = 300.0
    """With "per-client": seconds a client's session is kept without requests."""
    max_sessions: int = Field(default=16, ge=1)
    """With "per-client": the most sessions kept at once (the least recently used is closed)."""
    roots: tuple[str, ...] | None = Field(default=None, strict=False)
    """The folders the server may see, as `file://` URIs (absolute paths in hub.toml become URIs): the
    hub's answer to every `roots/list` the server asks. None: the server hears a client's roots."""
    tools: dict[str, ToolOverride] = Field(default_factory=dict)
    """What a model reads of some of the server's tools, by the server's own tool name ([servers.NAME.tools.TOOL])."""
    sandbox: SandboxSettings | None = None
    """A stdio server's own sandbox: a profile's name ("standard", "network", "off") or a table of [sandbox]'s
    keys over the hub-wide ones ([servers.NAME.sandbox]). Unset: the hub-wide [sandbox]."""
    unusable: str | None = None
    """Not a hub.toml key: why the loader left this server out (a variable its table needs is not set); such a
    server is not enabled."""

    @property
    def kind(self) -> Literal["stdio", "auto", "streamable-http", "sse"]:
        """How the hub reaches this server ("auto": found by its first connection)."""
        if self.command is not None:
            return "stdio"
        return "streamable-http" if self.transport == "http" else self.transport or "auto"

    @field_validator("url")
    @classmethod
    def _http_url(cls, url: str | None) -> str | None:
        if url is None or url.startswith("${"):  # scheme from a variable: checked once expanded
            return url
        parts = urlsplit(url)
        if parts.scheme.lower() not in ("http", "https") or not parts.netloc:
            raise rule_error(
                'url must be an http:// or https:// address, like "https://example.com/mcp"; fix the address'
            )
        return url

    @field_validator("headers")
    @classmethod
    def _field_values(cls, headers: dict[str, str]) -> dict[str, str]:
        """Values as HTTP sends them: without the spaces and tabs around them (RFC 9110), and on one line."""
        for name, value in headers.items():
            if any((ord(char) < 0x20 and char != "\t") or char == "\x7f" for char in value):
                raise rule_error(
                    "a header value must not hold a line break or other control character (a token read from "
                    "a file often ends with one); remove it",
                    name,
                )
        return {name: value.strip(" \t") for name, value in headers.items()}

    @field_validator("sandbox", mode="before")
    @classmethod
    def _sandbox_profile(cls, value: Any) -> Any:
        return _sandbox_table(value)

    @field_validator("roots")
    @classmethod
    def _root_uris(cls, roots: tuple[str, ...] | None) -> tuple[str, ...] | None:
        if roots is None:
            return None
        return tuple(_root_uri(root, index) for index, root in enumerate(roots))

    @model_validator(mode="after")
    def _check_server(self) -> ServerConfig:
        _check_mount_name(self.name)
        _check_kind(self)
        if self.auth.per_caller and self.isolation != "per-client":
            raise rule_error(
                f'a mode = "{self.auth.mode}" server is served per client (each session carries one caller\'s '
                'token); write isolation = "per-client", or leave isolation out',
                "isolation",
            )
        return self

    @model_validator(mode="before")
    @classmethod
    def _exchange_per_client(cls, data: Any) -> Any:
        """A token exchange mount is per-client unless said otherwise (and `_check_server` refuses "shared")."""
        if isinstance(data, dict) and "isolation" not in data:
            auth = data.get("auth")
            mode = auth.get("mode") if isinstance(auth, dict) else getattr(auth, "mode", None)
            one_person = auth.get("id_token") if isinstance(auth, dict) else getattr(auth, "id_token", None)
            if mode in ("token_exchange", "user") or (mode == "enterprise" and one_person is None):
                return {**data, "isolation": "per-client"}
        return data


def _root_uri(root: str, index: int) -> str:
    """A root as a `file://` URI: an absolute path converted, a `file://` URI kept as written."""
    if root.startswith("${"):  # from a variable: checked once expanded
        return root
    if "\x00" in root:
        raise rule_error("a root cannot contain a NUL character; write the folder's absolute path", index)
    parts = urlsplit(root)
    if parts.scheme.lower() == "file":
        if parts.netloc not in ("", "localhost") or not parts.path.startswith("/"):
            raise rule_error(
                f"{root!r} is not a local file:// URI; write it as file:///absolute/path, or give the absolute path",
                index,
            )
        return root
    if parts.scheme and "://" in root:
        raise rule_error(
            f"{root!r} is not a local folder; a root is an absolute path or a file:// URI, like 'file:///srv/data'",
            index,
        )
    if not os.path.isabs(root):
        raise rule_error(f"{root!r} is not an absolute path; write the folder's full path, like '/home/me/docs'", index)
    return Path(os.path.normpath(root)).as_uri()


def _check_mount_name(name: str) -> None:
    if not MOUNT_NAME_PATTERN.match(name):
        raise rule_error(
            f"invalid server name {name!r}: a name starts with a lowercase letter and has at most 32 "
            f"lowercase letters, digits and hyphens; rename the table to [servers.{to_mount_name(name)}]"
        )


_STDIO_ONLY = ("args", "env", "cwd", "sandbox")
_REMOTE_ONLY = ("transport", "headers", "auth")


def _check_kind(server: ServerConfig) -> None:
    """Exactly one of command/url, and no keys that belong to the other kind."""
    if server.command is None and server.url is None:
        raise rule_error(
            'missing command or url; add command = "..." to start a local process, '
            'or url = "https://..." to connect to a remote server'
        )
    if server.command is not None and server.url is not None:
        raise rule_error("command and url are both set; keep command for a local process or url for a remote server")
    stdio = server.command is not None
    for key in _REMOTE_ONLY if stdio else _STDIO_ONLY:
        if key in server.model_fields_set:
            needs = "a remote server (one with url)" if stdio else "a local process (one with command)"
            raise rule_error(f"{key} only applies to {needs}; remove it", key)


class HubConfig(BaseModel):
    """A whole hub.toml; `path` is the file it came from, for messages."""

    model_config = _MODEL_CONFIG

    hub: HubSettings = Field(default_factory=HubSettings)
    http: HttpSettings = Field(default_factory=HttpSettings)
    servers: dict[str, ServerConfig] = Field(default_factory=dict)
    policy: PolicySettings = Field(default_factory=PolicySettings)
    audit: AuditFileSettings = Field(default_factory=AuditFileSettings)
    auth: AuthSettings = Field(default_factory=AuthSettings)
    telemetry: TelemetrySettings = Field(default_factory=TelemetrySettings)
    cache: CacheSettings = Field(default_factory=CacheSettings)
    results: ResultSettings = Field(default_factory=ResultSettings)
    search: SearchSettings = Field(default_factory=SearchSettings)
    guardrails: GuardrailsSettings = Field(default_factory=GuardrailsSettings)
    cluster: ClusterSettings = Field(default_factory=ClusterSettings)
    sandbox: SandboxSettings = Field(default_factory=SandboxSettings)
    endpoints: dict[str, EndpointSettings] = Field(default_factory=dict)
    admin: AdminSettings = Field(default_factory=AdminSettings)
    skills: SkillsSettings = Field(default_factory=SkillsSettings)
    path: str = "hub.toml"

    def relative(self, path: str) -> Path:
        """A path from the config, resolved against the folder of the config file."""
        return Path(self.path).parent / Path(path).expanduser()

    def pins_file(self) -> Path | None:
        """The tool pins file `[policy] pins` names, or None (no pinning)."""
        return self._kept_file(self.policy.pins, "pins", ".json")

    def audit_file(self) -> Path | None:
        """The audit log `[audit] file` names, or None (no audit log)."""
        return self._kept_file(self.audit.file, "audit", ".jsonl")

    def _kept_file(self, setting: bool | str | None, kind: str, suffix: str) -> Path | None:
        if isinstance(setting, str):
            return self.relative(setting)
        return state_file(self.path, kind, suffix) if setting else None

    def enabled_servers(self) -> dict[str, ServerConfig]:
        """The servers to mount, by name, in file order."""
        return {name: server for name, server in self.servers.items() if server.enabled}

    @field_validator("servers", mode="before")
    @classmethod
    def _name_servers(cls, servers: Any) -> Any:
        """Each server's `name` is its table key."""
        if not isinstance(servers, dict):
            return servers
        return {name: {**table, "name": name} if isinstance(table, dict) else table for name, table in servers.items()}

    @model_validator(mode="after")
    def _check_prefixes(self) -> HubConfig:
        enabled = self.enabled_servers()
        for name, server in enabled.items():
            if not server.prefix and len(enabled) > 1:
                others = ", ".join(other for other in enabled if other != name)
                raise rule_error(
                    f"prefix = false is only allowed when {name!r} is the only enabled server: unprefixed "
                    f"names could collide with those of the other mounts ({others}); remove 'prefix = false' "
                    "or disable the other servers",
                    *("servers", name, "prefix"),
                )
        return self

    @model_validator(mode="after")
    def _mount_skills_folder(self) -> HubConfig:
        """`[skills] folder` becomes the last mount (`SkillsSettings.server`), beside the servers of this file."""
        server = self.skills.server(self.path, self.sandbox)
        if server is None or self.servers.get(server.name) == server:  # (a config validated again from its dump)
            return self
        if server.name in self.servers:
            raise rule_error(
                f"[servers.{server.name}] is in this file already; name the skills folder's mount otherwise "
                '(mount = "team-skills"), or rename that server',
                *("skills", "mount"),
            )
        unprefixed = next((name for name, s in self.enabled_servers().items() if not s.prefix), None)
        if unprefixed is not None:
            raise rule_error(
                f"prefix = false is only allowed when {unprefixed!r} is the only enabled server, and the skills folder "
                "is mounted beside it; remove 'prefix = false', or the [skills] folder",
                *("servers", unprefixed, "prefix"),
            )
        self.servers[server.name] = server
        return self

    @model_validator(mode="after")
    def _sandbox_each_stdio_server(self) -> HubConfig:
        """Each stdio server's `sandbox` becomes the one it runs in (`effective_sandbox`); the `[skills]` folder's
        mount has its own already (`SkillsSettings.server`)."""
        for name, server in self.servers.items():
            if self.skills.folder is not None and name == self.skills.mount:
                continue
            if server.command is not None:
                sandbox = effective_sandbox(self.sandbox, server.sandbox)
                if sandbox != server.sandbox:
                    self.servers[name] = server.model_copy(update={"sandbox": sandbox})
        return self

    @model_validator(mode="after")
    def _check_endpoints(self) -> HubConfig:
        """Endpoint names go in URLs (`/mcp/NAME`); the mounts an endpoint names are servers of this file."""
        for name, endpoint in self.endpoints.items():
            if name == "server-card":
                raise rule_error(
                    "server-card is where the hub's server card is served (PATH/server-card); name the endpoint "
                    "otherwise",
                    *("endpoints", name),
                )
            if not MOUNT_NAME_PATTERN.match(name):
                raise rule_error(
                    f"an endpoint name is lowercase letters, digits and '-', starting with a letter; "
                    f"write [endpoints.{to_mount_name(name)}]",
                    *("endpoints", name),
                )
            for index, mount in enumerate(endpoint.servers or ()):
                if mount not in self.servers:
                    close = difflib.get_close_matches(mount, list(self.servers), n=1)
                    fix = f"did you mean {close[0]!r}?" if close else f"servers: {', '.join(self.servers) or 'none'}"
                    raise rule_error(f"no server {mount!r} in this file; {fix}", *("endpoints", name, "servers", index))
        return self

    @model_validator(mode="after")
    def _snapshot_has_its_own_file(self) -> HubConfig:
        """The snapshot is rewritten at will: it must not be a file the hub reads or keeps for other uses."""
        if not isinstance(self.hub.catalog_snapshot, str):  # true: a file in the user's state folder
            return self
        snapshot = os.path.normpath(self.relative(self.hub.catalog_snapshot))
        others = {
            "this hub.toml": os.path.normpath(self.path),
            "[policy] pins": isinstance(self.policy.pins, str) and os.path.normpath(self.relative(self.policy.pins)),
            "[audit] file": isinstance(self.audit.file, str) and os.path.normpath(self.relative(self.audit.file)),
        }
        for what, path in others.items():
            if path == snapshot:
                raise rule_error(
                    f"catalog_snapshot is {what}, which the snapshot would overwrite; name a file of its own, "
                    'like "catalog.json"',
                    *("hub", "catalog_snapshot"),
                )
        return self


# -- loading -----------------------------------------------------------------------------------


def is_loopback(host: str) -> bool:
    """Whether `host` (an address or a name to bind) listens on this machine only: `localhost`, 127.0.0.0/8, ::1."""
    if host.lower().rstrip(".") == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def unauthenticated_exposure(config: HubConfig, host: str) -> ConfigError | None:
    """The error a hub serving HTTP on `host` must refuse to start with: an address reachable from other machines,
    no client authentication, and no `[http] allow_unauthenticated = true` (None: nothing to refuse)."""
    if is_loopback(host) or config.auth.api_keys or config.auth.oauth is not None or config.http.allow_unauthenticated:
        return None
    return ConfigError(
        config.path,
        "http.host",
        f"serving HTTP on {host}, which other machines can reach, with no client authentication would let anyone "
        "who reaches the port call every tool as the principal 'anonymous'; add [auth] api_keys = { NAME = "
        '"${KEY_VARIABLE}" } (or [auth.oauth]), or serve on host = "127.0.0.1", or, if a proxy in front '
        "authenticates every request, set allow_unauthenticated = true in [http]",
    )


def load_config(path: str | os.PathLike[str], environ: Mapping[str, str] | None = None) -> HubConfig:
    """Read, validate and expand a hub.toml file."""
    file = os.fspath(path)
    try:
        text = Path(file).read_text(encoding="utf-8")
    except FileNotFoundError:
        why = "file not found; create it (`mcp-hub init` writes one), or pass --config PATH"
        raise ConfigError(file, "", why) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(file, "", f"cannot read it ({exc}); make it a readable UTF-8 text file") from None
    return parse_config(text, file, environ)


def parse_config(text: str, file: str = "hub.toml", environ: Mapping[str, str] | None = None) -> HubConfig:
    """Validate and expand hub.toml `text`; `file` names it in error messages."""
    data = parse_toml(text, file)
    unknown = _unknown_keys(data, file)
    structure = _validate(data, file, unknown)
    variables = _variables(structure, os.environ if environ is None else environ)
    return _validate(_expand_servers(data, structure, variables, file), file)


def _variables(config: HubConfig, environ: Mapping[str, str]) -> _Variables:
    """What `${VAR}` references are looked up in: `environ`, then the `[hub] env_file` (the environment wins)."""
    if config.hub.env_file is None:
        return _Variables(environ, None)
    path = config.relative(config.hub.env_file)
    if not path.is_file():
        raise ConfigError(
            config.path, "hub.env_file", f"{path} is not a file; create it (KEY=value lines) or remove env_file"
        )
    from dotenv import dotenv_values  # python-dotenv: only for an env_file

    try:
        values = dotenv_values(path, encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(
            config.path, "hub.env_file", f"cannot read {path} ({exc}); make it a UTF-8 text file"
        ) from None
    found = {key: value for key, value in values.items() if value is not None}
    return _Variables({**found, **environ}, str(path))


class _Variables(dict[str, str]):
    """The variables `${VAR}` references expand to, and the env_file some of them came from (for messages)."""

    def __init__(self, values: Mapping[str, str], env_file: str | None) -> None:
        super().__init__(values)
        self.env_file = env_file


def parse_toml(text: str, file: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(file, "", f"invalid TOML: {exc}; fix the syntax there") from None


def _validate(data: dict[str, Any], file: str, unknown: list[ConfigError] | None = None) -> HubConfig:
    """`data` as a `HubConfig`; else every problem found (`unknown`: the unknown keys) in one `ConfigError`."""
    problems = list(unknown or ())
    try:
        config = HubConfig.model_validate({**data, "path": file})
    except ValidationError as exc:
        # An unknown key is reported once: as `_unknown_keys` words it, else (a table it does not walk) here.
        named = {problem.key for problem in problems}
        for error in exc.errors():
            if error["type"] != "extra_forbidden":
                problems.append(config_error(error, file))
            elif (key := dotted_key(error["loc"])) not in named:
                problems.append(ConfigError(file, key, _extra_reason(error["loc"])))
        problems = problems or [config_error(exc.errors()[0], file)]
    else:
        if not problems:
            return config
    raise all_of(problems)


def all_of(problems: list[ConfigError]) -> ConfigError:
    """One error for `problems`: the only one as it is, several one line each (file, key, fix)."""
    if len(problems) == 1:
        return problems[0]
    first = problems[0]
    lines = "\n".join(f"  {problem}" for problem in problems)
    error = ConfigError(first.file, "", f"{len(problems)} problems; fix each:\n{lines}")
    error.problems = problems
    return error


# -- unknown keys ------------------------------------------------------------------------------

_TOP_KEYS = (
    "hub",
    "http",
    "servers",
    "policy",
    "audit",
    "auth",
    "telemetry",
    "cache",
    "results",
    "search",
    "guardrails",
    "cluster",
    "sandbox",
    "endpoints",
    "admin",
    "skills",
)
_SECTION_KEYS = {
    "hub": tuple(HubSettings.model_fields),
    "http": tuple(HttpSettings.model_fields),
    "policy": tuple(PolicySettings.model_fields),
    "audit": tuple(AuditFileSettings.model_fields),
    "auth": tuple(AuthSettings.model_fields),
    "admin": tuple(AdminSettings.model_fields),
    "telemetry": tuple(TelemetrySettings.model_fields),
    "cache": tuple(CacheSettings.model_fields),
    "results": tuple(ResultSettings.model_fields),
    "search": tuple(SearchSettings.model_fields),
    "guardrails": tuple(GuardrailsSettings.model_fields),
    "cluster": tuple(ClusterSettings.model_fields),
    "sandbox": tuple(SandboxSettings.model_fields),
    "skills": tuple(SkillsSettings.model_fields),
}
_OAUTH_KEYS = tuple(OAuthSettings.model_fields)
_SERVER_KEYS = tuple(key for key in ServerConfig.model_fields if key not in ("name", "unusable"))
_SERVER_AUTH_KEYS = tuple(ServerAuth.model_fields)
_ENDPOINT_KEYS = tuple(EndpointSettings.model_fields)
_TOOL_OVERRIDE_KEYS = tuple(ToolOverride.model_fields)
_SERVER_SANDBOX_KEYS = tuple(key for key in SandboxSettings.model_fields if key != "required")


def _unknown_keys(data: dict[str, Any], file: str) -> list[ConfigError]:
    """The keys no model knows, worded better than pydantic's terser extra_forbidden errors."""
    found = _check_table(data, _TOP_KEYS, (), file)
    for section, allowed in _SECTION_KEYS.items():
        if isinstance(data.get(section), dict):
            found += _check_table(data[section], allowed, (section,), file)
    auth = data.get("auth")
    if isinstance(auth, dict) and isinstance(auth.get("oauth"), dict):
        found += _check_table(auth["oauth"], _OAUTH_KEYS, ("auth", "oauth"), file)
    servers = data.get("servers")
    if isinstance(servers, dict):
        for name, table in servers.items():
            if isinstance(table, dict):
                found += _check_table(table, _SERVER_KEYS, ("servers", name), file)
                if isinstance(table.get("auth"), dict):
                    found += _check_table(table["auth"], _SERVER_AUTH_KEYS, ("servers", name, "auth"), file)
                if isinstance(table.get("sandbox"), dict):
                    found += _check_table(table["sandbox"], _SERVER_SANDBOX_KEYS, ("servers", name, "sandbox"), file)
                for tool, override in (table["tools"] if isinstance(table.get("tools"), dict) else {}).items():
                    if isinstance(override, dict):
                        found += _check_table(override, _TOOL_OVERRIDE_KEYS, ("servers", name, "tools", tool), file)
    endpoints = data.get("endpoints")
    if isinstance(endpoints, dict):
        for name, table in endpoints.items():
            if isinstance(table, dict):
                found += _check_table(table, _ENDPOINT_KEYS, ("endpoints", name), file)
    return found


def _check_table(table: dict[str, Any], allowed: tuple[str, ...], loc: tuple[str, ...], file: str) -> list[ConfigError]:
    return [
        ConfigError(file, dotted_key((*loc, key)), unknown_key_reason(key, allowed))
        for key in table
        if key not in allowed
    ]


def _extra_reason(loc: tuple[str | int, ...]) -> str:
    """Why the key at `loc` (a pydantic `extra_forbidden` error) is refused, with the keys its table allows."""
    table = _model_at(loc[:-1])
    allowed = tuple(table.model_fields) if table is not None else ()
    return unknown_key_reason(str(loc[-1]), allowed) if allowed else f"unknown key {loc[-1]!r}; remove it"


def _model_at(loc: tuple[str | int, ...]) -> type[BaseModel] | None:
    """The model of the table at `loc` in a `HubConfig`: through optional tables, arrays of tables and named
    tables (`[servers.NAME]`); None where `loc` leads elsewhere."""
    kind: Any = HubConfig
    for part in loc:
        kind = _unwrapped(kind)
        if isinstance(kind, type) and issubclass(kind, BaseModel):
            field = kind.model_fields.get(str(part))
            if field is None:
                return None
            kind = field.annotation
        elif get_origin(kind) in (tuple, list) and isinstance(part, int):
            kind = get_args(kind)[0]
        elif get_origin(kind) in (dict, Mapping):
            kind = get_args(kind)[1]
        else:
            return None
    kind = _unwrapped(kind)
    return kind if isinstance(kind, type) and issubclass(kind, BaseModel) else None


def _unwrapped(kind: Any) -> Any:
    """`kind` without `Annotated[...]` and an optional's `None`."""
    while True:
        origin = get_origin(kind)
        if origin is Annotated:
            kind = get_args(kind)[0]
        elif origin in (Union, types.UnionType):
            options = [arg for arg in get_args(kind) if arg is not type(None)]
            if len(options) != 1:
                return kind
            kind = options[0]
        else:
            return kind


def unknown_key_reason(key: str, allowed: tuple[str, ...]) -> str:
    close = difflib.get_close_matches(key, allowed, n=1)
    if close:
        return f"unknown key {key!r}; did you mean {close[0]!r}?"
    return f"unknown key {key!r}; remove it (allowed keys: {', '.join(allowed)})"


# -- pydantic errors -> ConfigError ------------------------------------------------------------

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+\Z")
_TYPE_NAMES = {str: "a string", list: "an array", dict: "a table"}
_UNQUOTED_TYPES = frozenset(("int_type", "float_type", "bool_type"))


def dotted_key(loc: tuple[str | int, ...]) -> str:
    """A location as a dotted key for messages: servers.github.args[2], servers."My Server"."""
    key = ""
    for part in loc:
        if isinstance(part, int):
            key += f"[{part}]"
        else:
            part = part if _BARE_KEY.match(part) else json.dumps(part)
            key = f"{key}.{part}" if key else part
    return key


def config_error(error: ErrorDetails, file: str) -> ConfigError:
    if error["type"] == "hub_rule":
        ctx = error.get("ctx", {})
        return ConfigError(file, dotted_key((*error["loc"], *ctx["key"])), ctx["reason"])
    return ConfigError(file, dotted_key(error["loc"]), _type_reason(error))


def _type_reason(error: ErrorDetails) -> str:
    if error["type"] == "missing":
        return f"missing: its table needs {error['loc'][-1]} = ..."
    got = _describe(error["input"])
    if error["type"] in ("model_type", "dict_type"):
        return f"must be a table, got {got}; write it as a [section] or as {{ key = value }}"
    expected = re.sub(r"^\w+ should ", "must ", error["msg"]).replace("a valid tuple", "an array")
    return f"{expected}, got {got}; {_type_hint(error)}"


def _type_hint(error: ErrorDetails) -> str:
    quoted = isinstance(error["input"], str)
    if quoted and error["type"] in _UNQUOTED_TYPES:
        return "remove the quotes"
    if not quoted and error["type"] == "string_type":
        return 'put it in quotes, like "value"'
    return "fix the value"


def _describe(value: Any) -> str:
    """A value for a message; strings are never shown (they may be secrets)."""
    if isinstance(value, bool):
        return f"{str(value).lower()} (a boolean)"
    if isinstance(value, int | float):
        return f"{value} (a number)"
    return _TYPE_NAMES.get(type(value), f"a {type(value).__name__}")


# -- ${VAR} expansion --------------------------------------------------------------------------

_REFERENCE = re.compile(r"\$\$|\$\{(?P<body>[^}]*)\}|\$\{")
_BODY = re.compile(r"(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?::-(?P<default>[^$]*))?\Z")
_EXPANDED_KEYS = frozenset(("command", "args", "env", "cwd", "url", "headers", "roots", "auth", "sandbox"))


class UnsetVariable(ConfigError):
    """A `${NAME}` reference without a default whose variable is set neither in the environment nor in the
    `[hub] env_file`."""

    def __init__(self, file: str, key: str, name: str, env_file: str | None) -> None:
        self.name = name
        where = f"add {name}=... to {env_file}" if env_file else "set it in a dotenv file named by [hub] env_file"
        super().__init__(
            file, key, f"environment variable {name} is not set; export it, {where}, or write ${{{name}:-default}}"
        )


def expand_env(value: str, environ: Mapping[str, str], *, file: str, key: str) -> str:
    """Expand `${VAR}`, `${VAR:-default}` and `$$` in `value`; other `$` stay as they are.

    `${VAR:-default}` uses the default when VAR is unset or empty; `${VAR}` requires VAR set (`UnsetVariable`).
    """

    def substitute(match: re.Match[str]) -> str:
        if match[0] == "$$":
            return "$"
        return _resolve(match["body"], environ, file, key)

    return _REFERENCE.sub(substitute, value)


def _resolve(body: str | None, environ: Mapping[str, str], file: str, key: str) -> str:
    if body is None:
        raise ConfigError(file, key, "unclosed '${'; write ${NAME} for a variable, or $$ for a literal '$'")
    reference = _BODY.match(body)
    if reference is None:
        raise ConfigError(
            file,
            key,
            f"invalid variable reference '${{{body}}}'; write ${{NAME}} or ${{NAME:-default}} (NAME is letters, "
            "digits and '_'; a default cannot contain '$'), or $$ for a literal '$'",
        )
    name, default = reference["name"], reference["default"]
    found = environ.get(name)
    if default is not None:
        return found or default
    if found is None:
        raise UnsetVariable(file, key, name, getattr(environ, "env_file", None))
    return found


def variable_references(value: str) -> list[tuple[str, str | None]]:
    """The well-formed `${NAME}` / `${NAME:-default}` references in `value`, as (NAME, default)."""
    references = []
    for match in _REFERENCE.finditer(value):
        reference = _BODY.match(match["body"] or "")
        if reference is not None:
            references.append((reference["name"], reference["default"]))
    return references


def _expand_servers(data: dict[str, Any], config: HubConfig, environ: Mapping[str, str], file: str) -> dict[str, Any]:
    """`data` (already validated as `config`) with the enabled servers' strings expanded. A server whose table
    needs a variable that is not set is disabled, with the reason (`unusable`); the hub-wide settings' missing
    variables are errors, all reported at once."""
    tables = data.get("servers", {})
    servers = {}
    for name, server in config.servers.items():
        if name not in tables:  # the [skills] folder's mount, made again from [skills] once expanded
            continue
        if not server.enabled:
            servers[name] = tables[name]
            continue
        try:
            servers[name] = _expand_server(tables[name], ("servers", name), environ, file)
        except UnsetVariable as exc:
            reason = f"{exc}; server '{name}' is disabled until it is set"
            servers[name] = {**tables[name], "enabled": False, "unusable": reason}
    expanded = {**data, "servers": servers}
    problems: list[ConfigError] = []

    def expand(section: str, keys: tuple[str, ...] | None) -> None:
        table = data.get(section)
        if not isinstance(table, dict):
            return
        values = {}
        for key, value in table.items():
            if keys is None or key in keys:
                try:
                    value = _expand_value(value, (section, key), environ, file)
                except ConfigError as exc:
                    problems.append(exc)
            values[key] = value
        expanded[section] = values

    expand("auth", ("api_keys", "oauth"))
    expand("telemetry", ("endpoint", "headers"))
    expand("admin", ("keys", "oidc"))
    expand("cluster", None)
    if problems:
        raise all_of(problems)
    return expanded


def _expand_server(
    table: dict[str, Any], loc: tuple[str, ...], environ: Mapping[str, str], file: str
) -> dict[str, Any]:
    return {
        key: _expand_value(value, (*loc, key), environ, file) if key in _EXPANDED_KEYS else value
        for key, value in table.items()
    }


def _expand_value(value: Any, loc: tuple[str | int, ...], environ: Mapping[str, str], file: str) -> Any:
    """Expand the strings of a validated value (a string, or an array or table holding strings)."""
    if isinstance(value, str):
        return expand_env(value, environ, file=file, key=dotted_key(loc))
    if isinstance(value, list):
        return [_expand_value(item, (*loc, index), environ, file) for index, item in enumerate(value)]
    if isinstance(value, dict):
        return {key: _expand_value(item, (*loc, key), environ, file) for key, item in value.items()}
    return value  # a number or a boolean
