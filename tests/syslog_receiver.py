"""A real syslog receiver: `rsyslogd` (Debian's `rsyslog` and `rsyslog-openssl`; `.ci/run` installs them), run as a
foreground process with a configuration of its own in a test's folder, on a free loopback port, over TCP or TLS.

It listens with `imtcp` (octet-counted and newline framing, RFC 6587; TLS with the OpenSSL stream driver, RFC 5425),
parses each message as RFC 5424, and writes every message it parsed as one JSON object of its header fields and
its MSG to a file (`messages()`), so a test reads what rsyslog understood, field by field, not the bytes it was
sent. A test can kill it and start it again on the same port.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

from tests.conftest import free_port

RSYSLOGD = shutil.which("rsyslogd") or next(
    (path for path in ("/usr/sbin/rsyslogd", "/sbin/rsyslogd") if Path(path).exists()), None
)
OSSL_DRIVER = next(Path("/usr/lib").glob("*/rsyslog/lmnsd_ossl.so"), None)
"""rsyslog's OpenSSL stream driver (Debian's rsyslog-openssl), which its TLS listener needs."""

_TEMPLATE = """
template(name="fields" type="list" option.jsonf="on") {
  property(outname="pri" name="pri" format="jsonf")
  property(outname="facility" name="syslogfacility-text" format="jsonf")
  property(outname="severity" name="syslogseverity-text" format="jsonf")
  property(outname="time" name="timereported" dateFormat="rfc3339" format="jsonf")
  property(outname="hostname" name="hostname" format="jsonf")
  property(outname="app_name" name="app-name" format="jsonf")
  property(outname="procid" name="procid" format="jsonf")
  property(outname="msgid" name="msgid" format="jsonf")
  property(outname="structured_data" name="structured-data" format="jsonf")
  property(outname="version" name="protocol-version" format="jsonf")
  property(outname="msg" name="msg" format="jsonf")
}
"""


class SyslogReceiver:
    """rsyslogd on 127.0.0.1:`port`; `tls`: (CA, certificate, key) PEM files for a TLS listener; `clients`: "anon"
    (any client) or "x509/certvalid" (only one with a certificate of the CA: mutual TLS)."""

    def __init__(self, directory: Path, *, tls: tuple[Path, Path, Path] | None = None, clients: str = "anon") -> None:
        self.port = free_port()
        self.directory = directory
        self.output = directory / "received.jsonl"
        (directory / "work").mkdir(parents=True, exist_ok=True)
        if tls is None:
            listener = 'module(load="imtcp")\n'
        else:
            ca, cert, key = tls
            listener = (
                f'global(DefaultNetstreamDriver="ossl" DefaultNetstreamDriverCAFile="{ca}"\n'
                f'       DefaultNetstreamDriverCertFile="{cert}" DefaultNetstreamDriverKeyFile="{key}")\n'
                'module(load="imtcp" StreamDriver.Name="ossl" StreamDriver.Mode="1"\n'
                f'       StreamDriver.AuthMode="{clients}")\n'
            )
        self.config = directory / "rsyslog.conf"
        self.config.write_text(
            f'global(workDirectory="{directory / "work"}")\n'
            + listener
            + f'input(type="imtcp" port="{self.port}" address="127.0.0.1")\n'
            + _TEMPLATE
            + f'*.* action(type="omfile" file="{self.output}" template="fields")\n',
            encoding="utf-8",
        )
        self._process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        assert RSYSLOGD is not None
        command = [RSYSLOGD, "-n", "-f", str(self.config), "-i", str(self.directory / "rsyslogd.pid")]
        self._process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 15
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                if self._process.poll() is not None:
                    raise RuntimeError(f"rsyslogd did not start: {self._process.stderr.read().decode()}") from None  # type: ignore[union-attr]
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.02)

    def kill(self) -> None:
        if self._process is not None:
            self._process.kill()
            self._process.wait(10)
            if self._process.stderr is not None:
                self._process.stderr.close()
            self._process = None

    def messages(self) -> list[dict[str, Any]]:
        """What it received so far, oldest first: each message's RFC 5424 fields as rsyslog parsed them."""
        if not self.output.exists():
            return []
        return [json.loads(line) for line in self.output.read_text(encoding="utf-8").splitlines() if line]
