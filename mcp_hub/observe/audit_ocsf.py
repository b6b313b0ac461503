"""An audit event as OCSF: API Activity (class_uid 6003, category Application Activity), OCSF 1.8.0.

Pure: the fields of one audit line (`AuditEvent`, as its JSON parses) in, one OCSF event (a dict) out. Every
outcome the hub writes is mapped to a `status_id` and a `severity_id` here, in one table (`OUTCOMES`); the
method to an `activity_id` (reads are Read, revocations Delete, a console's changes Update, the rest Other);
the caller to `actor` (`user.name` the principal; for an access token `user.uid` its subject, `idp` its issuer
and `app_uid` its client); what was called to `api` (`operation` the MCP method, `service` the mount,
`request.uid` the decision id) and to `resources` (the tool, prompt or resource); the rest of the line, which
OCSF has no attribute for (arguments, rule, policy revision, cost, what a result budget cut, search results),
to `unmapped`, with its own keys. `tests/test_audit_ocsf.py` validates what this writes against the published
schema of the class (tests/data/ocsf).

`src_endpoint` names the client as the hub knows it: the MCP session's id, or the console or command line for an
administrator's action, or the hub itself; and, for an HTTP client, its network address (`ip`, from the line's
`client_address`: the peer's, or the client a trusted proxy names).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from mcp_hub import __version__

OCSF_VERSION = "1.8.0"
CLASS_UID, CATEGORY_UID = 6003, 6

STATUS = {0: "Unknown", 1: "Success", 2: "Failure", 99: "Other"}
SEVERITY = {0: "Unknown", 1: "Informational", 2: "Low", 3: "Medium", 4: "High", 5: "Critical", 6: "Fatal"}
ACTIVITY = {0: "Unknown", 1: "Create", 2: "Read", 3: "Update", 4: "Delete", 99: "Other"}

OUTCOMES: Mapping[str, tuple[int, int]] = {
    # outcome: (status_id, severity_id)
    "allowed": (1, 1),
    "confirmed": (1, 1),  # a person confirmed it
    "cached": (1, 1),  # answered from the cache
    "searched": (1, 1),  # a search of the tool search
    "redacted": (1, 3),  # a guardrail redacted what it found, the call went on
    "flagged": (1, 3),  # a guardrail flagged what it found, the call went on
    "tool_error": (2, 1),  # allowed; the tool answered with an error
    "error": (2, 2),
    "upstream_error": (2, 3),  # the server failed
    "cancelled": (99, 1),
    "denied": (2, 3),  # the policy refused it
    "refused": (2, 3),
    "declined": (2, 2),  # a person declined it
    "rate_limited": (2, 2),
    "over_budget": (2, 2),
    "blocked": (2, 4),  # a guardrail blocked it
    "tool_changed": (99, 4),  # a pinned tool's definition changed (perhaps poisoned)
    "server_limit": (2, 3),  # the sandbox ended a server for a limit
    "revoked": (1, 1),  # an administrator's actions
    "withdrawn": (1, 1),
    "forgotten": (1, 1),
    "failed": (2, 3),
}
"""Each outcome the audit log writes -> (OCSF status_id, severity_id). An outcome not listed (an administrator's
console action, "enabled", say) is a Success when it ends in "ed", else Other; Informational either way."""

_READS = ("tools/list", "prompts/list", "resources/list", "resources/templates/list", "resources/read", "prompts/get")
_USER_TYPES = {1: "User", 2: "Admin", 3: "System"}
_RESOURCE_TYPES = {"tools": "tool", "prompts": "prompt", "resources": "resource", "server": "server"}


def outcome_status(outcome: str) -> tuple[int, int]:
    """(status_id, severity_id) of an outcome (see `OUTCOMES`)."""
    known = OUTCOMES.get(outcome)
    if known is not None:
        return known
    return (1 if outcome.endswith("ed") else 99), 1


def activity_of(method: str) -> int:
    """The OCSF `activity_id` of an audited method."""
    if method in _READS:
        return 2
    if method.startswith("admin/"):
        return 4 if method.endswith(("/revoke", "/withdraw", "/forget", "/delete")) else 3
    return 99


def to_ocsf(line: Mapping[str, Any]) -> dict[str, Any]:
    """One audit line (the fields of `AuditEvent`) as an OCSF API Activity event."""
    outcome, method = str(line.get("outcome")), str(line.get("method"))
    status_id, severity_id = outcome_status(outcome)
    activity_id = activity_of(method)
    principal = str(line.get("principal"))
    event: dict[str, Any] = {
        "class_uid": CLASS_UID,
        "class_name": "API Activity",
        "category_uid": CATEGORY_UID,
        "category_name": "Application Activity",
        "activity_id": activity_id,
        "activity_name": ACTIVITY[activity_id] if activity_id != 99 else method,
        "type_uid": CLASS_UID * 100 + activity_id,
        "type_name": f"API Activity: {ACTIVITY[activity_id] if activity_id != 99 else method}",
        "time": epoch_ms(str(line.get("time"))),
        "severity_id": severity_id,
        "severity": SEVERITY[severity_id],
        "status_id": status_id,
        "status": STATUS[status_id] if status_id != 99 else outcome,
        "status_code": outcome,
        "metadata": {
            "version": OCSF_VERSION,
            "uid": line.get("decision_id"),
            "product": {"name": "mcp-hub", "vendor_name": "mcp-hub", "version": __version__},
            "log_name": "audit",
            "event_code": outcome,
        },
        "actor": _actor(line, principal),
        "api": _api(line, method),
        "src_endpoint": _source(line, principal),
    }
    if line.get("reason"):
        event["message"] = event["status_detail"] = str(line["reason"])
    if isinstance(line.get("latency_ms"), int | float):
        event["duration"] = round(line["latency_ms"])
    name = line.get("name")
    if name is not None:
        kind = _RESOURCE_TYPES.get(method.partition("/")[0], "other")
        resource: dict[str, Any] = {"name": str(name), "type": kind}
        if line.get("mount"):
            resource["group"] = {"name": str(line["mount"])}
        event["resources"] = [resource]
    unmapped = {
        key: line[key]
        for key in ("via", "arguments", "rule", "policy_revision", "results", "cost", "cut")
        if line.get(key) is not None
    }
    address = line.get("client_address")
    if address is not None and _ip(address) is None:  # not an IP address (a Unix socket's peer): kept as it is
        unmapped["client_address"] = address
    if unmapped:
        event["unmapped"] = unmapped
    return event


def _actor(line: Mapping[str, Any], principal: str) -> dict[str, Any]:
    type_id = 3 if principal == "mcp-hub" else 2 if principal.startswith("admin:") else 1
    user: dict[str, Any] = {"name": principal, "type_id": type_id, "type": _USER_TYPES[type_id]}
    actor: dict[str, Any] = {"user": user}
    if line.get("subject"):
        user["uid"] = str(line["subject"])
    if line.get("issuer"):
        actor["idp"] = {"uid": str(line["issuer"])}
    if line.get("client_id"):
        actor["app_uid"] = str(line["client_id"])
    if line.get("session"):
        actor["session"] = {"uid": str(line["session"])}
    return actor


def _api(line: Mapping[str, Any], method: str) -> dict[str, Any]:
    api: dict[str, Any] = {"operation": method, "request": {"uid": str(line.get("decision_id"))}}
    if line.get("mount"):
        api["service"] = {"name": str(line["mount"])}
    return api


def _source(line: Mapping[str, Any], principal: str) -> dict[str, Any]:
    if principal == "mcp-hub":
        return {"name": "mcp-hub"}
    if line.get("session"):
        source = {"uid": str(line["session"]), "name": "MCP client"}
    else:
        source = {"name": str(line.get("via") or "MCP client")}
    address = _ip(line.get("client_address"))
    if address is not None:
        source["ip"] = address
    return source


def _ip(value: object) -> str | None:
    """An address as OCSF's `ip_t` holds it (IPv4 or IPv6, an IPv6 zone left out); None for anything else."""
    if not isinstance(value, str):
        return None
    try:
        return str(ipaddress.ip_address(value.partition("%")[0]))
    except ValueError:
        return None


def epoch_ms(rfc3339: str) -> int:
    """ "2026-11-22T04:05:06.123Z" -> milliseconds since the epoch (OCSF's timestamp_t)."""
    return round(datetime.fromisoformat(rfc3339.replace("Z", "+00:00")).timestamp() * 1000)
