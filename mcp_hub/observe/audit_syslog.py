"""Audit events to a syslog receiver: RFC 5424 messages over TCP (RFC 6587) or TLS (RFC 5425), octet-counted.

Each event is one message, `<PRI>1 TIMESTAMP HOSTNAME APP-NAME PROCID MSGID - MSG`, framed as `LENGTH SP MESSAGE`
(octet counting, which both RFCs name, so a message may hold any byte, a newline too):

- PRI: the sink's facility (`authpriv` unless set) * 8 + a severity from the outcome (`severity_of`): info for a
  call that went through, notice for a refusal by the policy or a person, warning for a failure or a guardrail's
  finding, err for a blocked call or a tool whose definition changed;
- TIMESTAMP: the event's own time (RFC 3339, UTC, milliseconds); HOSTNAME: this host's fully qualified name;
  APP-NAME: the sink's `app_name`; PROCID: the hub's process id; MSGID: the outcome ("denied", "allowed"...);
- no structured data (`-`); MSG: the event in the sink's format (the hub's JSON line, or OCSF JSON), preceded by
  the UTF-8 byte order mark when it holds a non-ASCII character, as RFC 5424 asks of UTF-8 text.

Python's `logging.handlers.SysLogHandler` writes neither RFC 5424 nor octet-counted frames nor TLS, and the PyPI
packages that do are unmaintained, so the few lines that build a message are here.

Receivers never write back on a syslog connection, so one that is readable has been closed (or reset) by the
receiver: it is checked before each send, and reconnected, so that a receiver that restarted between two events
does not swallow the next batch into a socket nobody reads. A receiver that vanishes without closing (a host
powered off) is found out only when the kernel's send buffer fills or the connection times out: what was in that
buffer is lost, as with any syslog over TCP (RFC 6587 has no acknowledgements).
"""

from __future__ import annotations

import os
import select
import socket
import ssl
from collections.abc import Sequence
from pathlib import Path

from mcp_hub.config import SYSLOG_FACILITIES
from mcp_hub.observe.audit_ocsf import outcome_status
from mcp_hub.observe.audit_sink import Entry

TIMEOUT = 5.0
"""Seconds a connect, a TLS handshake or a send may take before the receiver is taken as down."""

_BOM = "\ufeff".encode()
_SEVERITY_BY_OCSF = {0: 6, 1: 6, 2: 5, 3: 4, 4: 3, 5: 2, 6: 2}
"""OCSF severity_id -> syslog severity: Informational -> info (6), Low -> notice (5), Medium -> warning (4),
High -> err (3), Critical and Fatal -> crit (2)."""


def severity_of(outcome: str) -> int:
    """The syslog severity of an audit outcome (from its OCSF severity, audit_ocsf.OUTCOMES)."""
    return _SEVERITY_BY_OCSF[outcome_status(outcome)[1]]


def message(entry: Entry, *, facility: str, app_name: str, hostname: str, procid: int) -> bytes:
    """One RFC 5424 message (without its frame)."""
    outcome = str(entry.fields.get("outcome") or "-")
    pri = SYSLOG_FACILITIES.index(facility) * 8 + severity_of(outcome)
    msgid = _printable(outcome, 32)
    header = f"<{pri}>1 {entry.fields.get('time') or '-'} {hostname} {app_name} {procid} {msgid} - "
    text = entry.text.encode("utf-8", "backslashreplace")
    return header.encode("ascii") + (_BOM + text if not entry.text.isascii() else text)


def frame(msg: bytes) -> bytes:
    """Octet counting (RFC 6587 3.4.1, RFC 5425 4.3): the message's length in bytes, a space, the message."""
    return b"%d %s" % (len(msg), msg)


def _printable(value: str, most: int) -> str:
    """A header field: printable US-ASCII without spaces, at most `most` characters, "-" when empty."""
    kept = "".join(char for char in value if "!" <= char <= "~")[:most]
    return kept or "-"


class SyslogTransport:
    """A connection to one syslog receiver, opened at the first `send` and again after `close`."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        tls: ssl.SSLContext | None,
        server_name: str | None = None,
        facility: str = "authpriv",
        app_name: str = "mcp-hub",
        timeout: float = TIMEOUT,
    ) -> None:
        self.host, self.port, self.tls = host, port, tls
        self.server_name = server_name or host
        self.facility, self.app_name, self.timeout = facility, app_name, timeout
        self.hostname: str | None = None
        """This host's fully qualified name, looked up at the first send (on the sink's thread: it may ask DNS)."""
        self.description = f"syslog {'tls' if tls else 'tcp'}://{host}:{port}"
        self._socket: socket.socket | None = None

    def open(self) -> None:
        """Nothing: the first `send` connects."""

    def send(self, entries: Sequence[Entry]) -> None:
        if self._socket is not None and _closed_by_peer(self._socket, self.timeout):
            self.close()
        if self._socket is None:
            self._socket = self._connect()
        if self.hostname is None:
            self.hostname = _printable(socket.getfqdn(), 255)
        hostname, procid = self.hostname, os.getpid()
        data = b"".join(
            frame(message(entry, facility=self.facility, app_name=self.app_name, hostname=hostname, procid=procid))
            for entry in entries
        )
        self._socket.sendall(data)

    def probe(self) -> str:
        """Connect (and for TLS, shake hands and wait for the receiver's word), then close."""
        self._connect().close()
        return "reachable, its certificate verified" if self.tls is not None else "reachable (plain TCP)"

    def close(self) -> None:
        sock, self._socket = self._socket, None
        if sock is not None:
            try:
                if isinstance(sock, ssl.SSLSocket):
                    sock.settimeout(0.5)
                    sock.unwrap()
            except (OSError, ValueError):
                pass
            finally:
                sock.close()

    def _connect(self) -> socket.socket:
        sock = socket.create_connection((self.host, self.port), timeout=self.timeout)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
            if self.tls is not None:
                sock = self.tls.wrap_socket(sock, server_hostname=self.server_name)
                _accepted(sock, self.timeout)
        except BaseException:
            sock.close()
            raise
        return sock


ACCEPTED_WAIT = 0.5
"""Seconds a new TLS connection waits for the receiver's word after the handshake (see `_accepted`)."""


def _accepted(sock: socket.socket, timeout: float) -> None:
    """Raise ConnectionError if the receiver closed a new TLS connection right after the handshake.

    In TLS 1.3 the client's side of the handshake ends before the server has checked the client's certificate: a
    receiver that requires one the hub does not send, or refuses the one it sends, closes the connection after the
    hub's handshake succeeded, and what the hub writes first would be lost. So a new connection waits up to
    `ACCEPTED_WAIT` seconds for the receiver's first word: its session tickets (sent once it has accepted the
    client: the connection is kept at once), or the end of the connection (refused). A receiver that says nothing
    (TLS 1.2, no tickets) is taken as accepting after the wait."""
    readable, _, _ = select.select([sock], [], [], ACCEPTED_WAIT)
    if readable and _closed_by_peer(sock, timeout):
        raise ConnectionError(
            "the receiver closed the connection right after the TLS handshake: does it require a client "
            "certificate (cert, key) the hub does not send, or refuse the one it sends?"
        )


def _closed_by_peer(sock: socket.socket, timeout: float) -> bool:
    """Whether the receiver closed or reset the connection: readable, and reading finds its end (or an error)."""
    try:
        readable, _, _ = select.select([sock], [], [], 0)
        if not readable:
            return False
        sock.setblocking(False)
        try:
            return sock.recv(1) == b""  # a receiver that wrote something is odd, not closed: keep the connection
        finally:
            sock.settimeout(timeout)
    except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
        return False  # TLS records that carried no data (a TLS 1.3 session ticket)
    except OSError:
        return True


def tls_context(ca: Path | None, cert: Path | None, key: Path | None) -> ssl.SSLContext:
    """The client TLS context of a syslog sink: the receiver's certificate checked against `ca` (None: the system's
    CAs) and its name; `cert` and `key`, the hub's own certificate for a receiver that asks for one."""
    context = ssl.create_default_context(cafile=None if ca is None else str(ca))
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    if cert is not None:
        context.load_cert_chain(str(cert), None if key is None else str(key))
    return context
