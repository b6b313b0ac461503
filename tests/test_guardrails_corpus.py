"""Two corpora for the detectors: every secret and personal-data format the README names, each redacted whole
(no part of the token left, in every setting it is written in), and realistic strings that are none of them,
which every detector passes untouched."""

from __future__ import annotations

import base64
import hashlib
import string
import uuid

import pytest

from mcp_hub.guardrails import DETECTORS, Detectors, scan_value

REGIONS = ("US", "GB", "DE")
detectors = Detectors(known=["hub-own-value-8d2f51"], regions=REGIONS)
ALL = DETECTORS[:-1]  # "all": every detector but "instructions"
BASE62 = string.digits + string.ascii_letters


def chars(n: int, seed: str, alphabet: str = BASE62) -> str:
    """`n` characters of `alphabet` that look random (the same each run): the body of a made-up token."""
    out, counter = "", 0
    while len(out) < n:
        digest = hashlib.sha256(f"{seed}/{counter}".encode()).digest()
        out += "".join(alphabet[b % len(alphabet)] for b in digest)
        counter += 1
    return out[:n]


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


URLSAFE = BASE62 + "-_"
JWT = ".".join(
    (
        b64url(b'{"alg":"HS256","typ":"JWT"}'),
        b64url(b'{"sub":"1234567890","name":"Ada Lovelace","iat":1516239022}'),
        chars(43, "jwt", URLSAFE),
    )
)
PEM = (
    "-----BEGIN RSA PRIVATE KEY-----\n"
    + "\n".join(chars(64, f"pem{i}", BASE62 + "+/") for i in range(4))
    + "\n-----END RSA PRIVATE KEY-----"
)

# name -> (the secret or personal datum, the kind reported). Formats that detect-secrets' patterns match only
# in part (Stripe's current 107-character keys, OpenAI's project keys, a JWT's signature, a Slack token's mixed
# case) are the ones whole-token redaction is for.
SECRETS: dict[str, tuple[str, str]] = {
    "aws access key id": ("AKIA" + chars(16, "aws", string.ascii_uppercase + string.digits), "aws_access_key"),
    "aws secret access key": (chars(40, "aws-secret", BASE62 + "+/"), "high_entropy"),
    "github classic token": ("ghp_" + chars(36, "ghp"), "github_token"),
    "github oauth token": ("gho_" + chars(36, "gho"), "github_token"),
    "github fine-grained token": ("github_pat_" + chars(22, "pat1") + "_" + chars(59, "pat2"), "github_token"),
    "gitlab token": ("glpat-" + chars(20, "glpat", URLSAFE), "gitlab_token"),
    "slack bot token": ("xoxb-" + "123456789012-1234567890123-" + chars(24, "slack"), "slack_token"),
    "slack webhook": (
        "https://hooks.slack.com/services/T"
        + chars(8, "t").upper()
        + "/B"
        + chars(10, "b").upper()
        + "/"
        + chars(24, "hook"),
        "slack_token",
    ),
    "stripe live key": ("sk_live_" + chars(99, "stripe"), "stripe_key"),
    "stripe restricted key": ("rk_live_" + chars(99, "stripe-rk"), "stripe_key"),
    "openai project key": (
        "sk-proj-"
        + chars(54, "oai1", URLSAFE)
        + chars(20, "oai2")
        + "T3BlbkFJ"
        + chars(20, "oai3")
        + chars(54, "oai4", URLSAFE),
        "openai_key",
    ),
    "openai legacy key": ("sk-" + chars(20, "oai-old1") + "T3BlbkFJ" + chars(20, "oai-old2"), "openai_key"),
    "anthropic key": ("sk-ant-api03-" + chars(93, "ant", URLSAFE) + "AA", "anthropic_key"),
    "google api key": ("AIza" + chars(35, "google", URLSAFE), "google_api_key"),
    "pypi token": ("pypi-AgEIcHlwaS5vcmc" + chars(80, "pypi", URLSAFE), "pypi_token"),
    "sendgrid key": ("SG." + chars(22, "sg1", URLSAFE) + "." + chars(43, "sg2", URLSAFE), "sendgrid_key"),
    "twilio key": ("SK" + chars(32, "twilio", string.digits + "abcdef"), "twilio_key"),
    "mailchimp key": (chars(32, "mc", string.digits + "abcdef") + "-us14", "mailchimp_key"),
    "square token": ("sq0csp-" + chars(43, "square", URLSAFE), "square_token"),
    "telegram bot token": ("123456789:" + chars(35, "telegram", URLSAFE), "telegram_token"),
    "discord bot token": (
        "M" + chars(23, "discord1", URLSAFE) + "." + chars(6, "discord2", URLSAFE) + "." + chars(27, "d3", URLSAFE),
        "discord_token",
    ),
    "jwt": (JWT, "jwt"),
    "private key": (PEM, "private_key"),
    "configured secret": ("hub-own-value-8d2f51", "configured_secret"),
}
"""Secrets written on their own: found by the "secrets" detector."""

PERSONAL: dict[str, tuple[str, str]] = {
    "visa": ("4111 1111 1111 1111", "card_number"),
    "mastercard": ("5555-5555-5555-4444", "card_number"),
    "amex": ("378282246310005", "card_number"),
    "iban de": ("DE89 3704 0044 0532 0130 00", "iban"),
    "iban gb": ("GB82WEST12345698765432", "iban"),
    "us ssn": ("536-90-4399", "national_id"),
    "spanish dni": ("54362315K", "national_id"),
    "email": ("ada.lovelace+news@example.co.uk", "email"),
    "phone international": ("+44 7911 123456", "phone"),
    "phone international us": ("+1 650-253-0000", "phone"),
    "phone us national": ("(650) 253-0000", "phone"),
    "phone us national dashes": ("650-253-0000", "phone"),
    "phone gb mobile national": ("07911 123456", "phone"),
    "phone gb london national": ("020 7946 0958", "phone"),
    "phone de berlin national": ("030 90182044", "phone"),
}

SETTINGS = {
    "sentence": "Here it is: {} (see above).",
    "end of sentence": "The value is {}. Next sentence",
    "key=value": "url?user=ada&token={}&page=2",
    "json": '{{"key": "{}", "n": 1}}',
    "json in a string": '{{\\"key\\":\\"{}\\",\\"n\\":1}}',
    "quoted": "export VALUE='{}'; echo done",
    "angle brackets": "<value>{}</value>",
    "line": "first line\n{}\nlast line",
}
"""The settings a value is written in; what surrounds it must survive as it was."""


def redact_all(text: str) -> tuple[str, dict[str, int]]:
    out, scan = scan_value(text, lambda value: detectors.find(value, ALL), lambda match: True)
    return out, scan.kinds()


def leftovers(secret: str, text: str, size: int = 8) -> list[str]:
    """The pieces of `secret` of `size` characters that are still in `text` (none: nothing of it survived)."""
    return sorted({secret[i : i + size] for i in range(len(secret) - size + 1) if secret[i : i + size] in text})


@pytest.mark.parametrize("setting", list(SETTINGS))
@pytest.mark.parametrize("name", list(SECRETS) + list(PERSONAL))
def test_each_format_is_redacted_whole_in_every_setting(name: str, setting: str) -> None:
    value, kind = {**SECRETS, **PERSONAL}[name]
    if "\n" in value and setting in ("key=value", "json", "json in a string", "quoted"):
        pytest.skip("a multi-line value is not written on one line")
    template = SETTINGS[setting]
    text = template.format(value)
    out, kinds = redact_all(text)
    assert kind in kinds, (name, setting, kinds)
    assert leftovers(value, out) == [], out
    before, after = template.split("{}")
    before, after = before.replace("{{", "{"), after.replace("}}", "}")
    assert out.startswith(before) and out.endswith(after), out  # the surroundings are kept
    assert out[len(before) : len(out) - len(after)].startswith("[REDACTED:"), out


def test_a_stripe_key_and_an_openai_project_key_leave_no_tail() -> None:
    """Before whole-token redaction, 75 characters of such a Stripe key and 54 of such an OpenAI key followed
    the marker."""
    for name in ("stripe live key", "openai project key"):
        value, kind = SECRETS[name]
        out, _ = redact_all(f"key {value} end")
        assert out == f"key [REDACTED:{kind}] end"


@pytest.mark.parametrize(
    ("text", "password", "kinds"),
    [
        ("postgres://app:s3cr3t-Pa55w0rd@db.example.com:5432/prod", "s3cr3t-Pa55w0rd", {"url_password", "email"}),
        ("mysql://root:Hunter2-hunter2@mysql.internal.example.org/app", "Hunter2-hunter2", {"url_password", "email"}),
        ("mongodb+srv://svc:Zq7-pL9x-Wd2@cluster0.ab12c.mongodb.net/db", "Zq7-pL9x-Wd2", {"url_password", "email"}),
        ("redis://default:Rd5-9sK2-x@localhost:6379/0", "Rd5-9sK2-x", {"url_password"}),
        (
            "https://deploy:Gh5-0nly-f0r-t3st@git.example.com/org/repo.git",
            "Gh5-0nly-f0r-t3st",
            {"url_password", "email"},
        ),
    ],
)
def test_database_and_basic_auth_urls_keep_every_detector(text: str, password: str, kinds: set[str]) -> None:
    """The password of a URL is found by "secrets" and, with the host, by "email": one redaction, both kinds."""
    out, found = redact_all(f"connect with {text} today")
    assert set(found) == kinds
    assert password not in out and out.startswith("connect with ") and out.endswith(" today")
    matches = [m for _, m in scan_value(text, lambda value: detectors.find(value, ALL))[1].hits]
    assert [m.detector for m in matches] == ["secrets"]  # one merged match, secrets first
    assert {k for m in matches for k in m.kinds} == kinds


def test_a_pair_of_aws_keys_in_a_credentials_file() -> None:
    key, secret = SECRETS["aws access key id"][0], SECRETS["aws secret access key"][0]
    text = f"[default]\naws_access_key_id = {key}\naws_secret_access_key = {secret}\nregion = eu-west-1\n"
    out, kinds = redact_all(text)
    assert out == (
        "[default]\naws_access_key_id = [REDACTED:aws_access_key]\n"
        "aws_secret_access_key = [REDACTED:high_entropy]\nregion = eu-west-1\n"
    )
    assert kinds == {"aws_access_key": 1, "high_entropy": 1}


def test_tokens_known_by_their_setting_npmrc_and_azure_connection_strings() -> None:
    npm = "npm_" + chars(36, "npm")
    azure = chars(86, "azure", BASE62 + "+/") + "=="
    text = (
        f"//registry.npmjs.org/:_authToken={npm}\n"
        f"DefaultEndpointsProtocol=https;AccountName=acme;AccountKey={azure};EndpointSuffix=core.windows.net"
    )
    out, kinds = redact_all(text)
    assert set(kinds) == {"npm_token", "azure_storage_key"}
    assert leftovers(npm, out) == [] and leftovers(azure, out) == []
    assert out.startswith("//registry.npmjs.org/:_authToken=[REDACTED:npm_token]\n")
    assert out.endswith(";EndpointSuffix=core.windows.net")


def test_an_email_in_a_sentence_keeps_the_sentence() -> None:
    out, _ = redact_all("Write to ada@example.com. She answers; or bob@example.org, or (carol@example.net)!")
    assert out == "Write to [REDACTED:email]. She answers; or [REDACTED:email], or ([REDACTED:email])!"


def test_national_phones_need_a_region() -> None:
    text = "call (650) 253-0000 or 07911 123456"
    assert Detectors().find(text, ["phone"]) == []
    assert [text[m.start : m.end] for m in Detectors(regions=["us"]).find(text, ["phone"])] == ["(650) 253-0000"]
    assert [text[m.start : m.end] for m in Detectors(regions=["GB"]).find(text, ["phone"])] == ["07911 123456"]
    assert Detectors(regions=["XX"]).find(text, ["phone"]) == []  # a region phonenumbers has no plan for
    assert Detectors(regions=["GB"]).knowing(["a-mount-secret-value"]).regions == ("GB",)  # a reload keeps them
    labelled = 'phone:07911 123456, "tel":"020 7946 0958", Tel. 030 90182044; at 12:30 2026'
    found = [labelled[m.start : m.end] for m in detectors.find(labelled, ["phone"])]
    assert found == ["07911 123456", "020 7946 0958", "030 90182044"]


# -- the negative corpus -----------------------------------------------------------------------------------------

PNG = base64.b64encode(hashlib.sha512(b"png").digest() * 6).decode()
NEGATIVE: list[str] = [
    # version control and package managers
    "git clone git@github.com:acme-corp/payments-service.git",
    "ssh://git@gitlab.example.com:2222/group/sub/repo.git",
    "commit 3b24927c0f1e4f5fa27bd2b7d4c1b25a8d8d4e2e (HEAD -> main, origin/main)",
    "Merge pull request #4821 from acme/feature/phone-regions",
    "integrity sha512-vpLQEs+VLCr1nU0BXS07maYoFwlDAH0gngQuuttxIwutDFEMHq2blX+8vpgxDdK3J1PwjCJiep77OitTZ4Ll1A==",
    "requests==2.32.3; urllib3>=1.26.18,<3; numpy~=1.26.4",
    "version 1.2.3, 10.4.0-rc.1, v2026.11.25, 1.0.0+build.20261125, 0.9.12-beta.3",
    "python 3.11.9 (main, Apr  2 2024, 08:25:04) [GCC 12.2.0]",
    # identifiers and digests
    *(str(uuid.UUID(int=n * 0x9E3779B97F4A7C15 % 2**128)) for n in range(1, 21)),
    *(hashlib.sha256(str(n).encode()).hexdigest() for n in range(20)),
    *(hashlib.sha1(str(n).encode()).hexdigest() for n in range(20)),
    *(f"sha256:{hashlib.sha256(str(n).encode()).hexdigest()}" for n in range(5)),
    "user_id=8812 session_id=4f9c2a1e order_id=ORD-2026-004512 invoice INV-000123-B",
    "PaymentIntentConfirmationHandler.handleAsyncWebhookEvent",
    "AbstractSingletonProxyFactoryBean, XMLHttpRequestEventTarget, getElementsByClassName",
    "CONFIG_MAX_RETRY_ATTEMPTS_BEFORE_CIRCUIT_BREAKER_OPENS",
    "pk_test_placeholder, sk_test_, the sk_live_ prefix",
    # dates, times and numbers
    "2026-11-25",
    "2026-11-25T10:00:00Z",
    "2026-11-25T10:00:00.123+01:00",
    "25.11.2026",
    "11/25/2026",
    "2026/11/25",
    "Tue, 25 Nov 2026 10:00:00 GMT",
    "12:30:45",
    "1732540000",
    "1732540000123",
    "1,204 tests in 61.3 s",
    "order 100234 shipped; order #4155550123 and order no. 2025550199",
    "Order #100-2345-6789, ref 20261125-0042, ticket 12345-67890",
    "Total: 1,234,567.89 EUR; 3.14159265; -273.15; 6.022e23",
    "ISBN 978-3-16-148410-0, ISSN 2049-3630",
    "port 8080, pid 12345, uid 1000, exit 137",
    # network
    "10.0.0.1",
    "192.168.100.200",
    "172.16.254.1:8443",
    "203.0.113.42/24",
    "2001:db8::8a2e:370:7334",
    "fe80::1%eth0",
    "https://api.example.com/v1/items/8812?page=2&per_page=50",
    "https://github.com/inspect-js/hasOwn/commit/fdab00e2703e65411424e19bf86a7e72a8f10da9",
    "https://docs.google.com/document/d/1aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789/edit",
    "mailto-less text with an at sign: 3 items @ 4.99 each, @mention, user@localhost",
    # files and data
    "/home/ada/projects/mcp-hub/mcp_hub/guardrails/scan.py:142",
    "C:\\Users\\Ada\\AppData\\Local\\Temp\\build-20261125\\out.log",
    "~/.config/mcp-hub/hub.toml",
    f"data:image/png;base64,{PNG}",
    f'<img src="data:image/png;base64,{PNG}" alt="chart">',
    'MIME-Version: 1.0; Content-Type: multipart/mixed; boundary="----=_Part_123_456.789"',
    "[2026-11-25T10:00:00Z] GET /api/v1/items/8812 200 12 ms trace=4bf92f3577b34da6a3ce929d0e0e4736",
]


@pytest.mark.parametrize("text", NEGATIVE)
def test_realistic_strings_pass_every_detector_untouched(text: str) -> None:
    out, kinds = redact_all(text)
    assert kinds == {} and out == text


@pytest.mark.slow
def test_false_positive_rate_of_national_phones() -> None:
    """Thousands of strings of the kinds that look like phone numbers to a loose matcher (order numbers with and
    without separators, dates, times, timestamps, versions, IP addresses, amounts), in the three regions: none is
    reported."""
    numbers = [int(hashlib.sha256(str(n).encode()).hexdigest()[:15], 16) for n in range(3000)]
    texts: list[str] = []
    for n in numbers:
        texts += [
            f"order {n % 10**10:010d}",
            f"Order #{n % 900 + 100}-{n // 7 % 9000 + 1000}-{n // 11 % 9000 + 1000}",
            f"{2000 + n % 30}-{n % 12 + 1:02d}-{n % 28 + 1:02d}",
            f"{n % 28 + 1:02d}.{n % 12 + 1:02d}.{2000 + n % 30}",
            f"{n % 256}.{n // 256 % 256}.{n // 65536 % 256}.{n // 2**24 % 256}",
            f"v{n % 30}.{n // 30 % 30}.{n // 900 % 300}",
            f"ts {1_600_000_000_000 + n % 10**11}",
            f"{n % 24:02d}:{n % 60:02d}:{n // 60 % 60:02d}",
            f"{n % 10**6:,}.{n % 100:02d} EUR",
        ]
    found = [text for text in texts if detectors.find(text, ["phone"])]
    assert len(texts) == 27_000
    assert found == []


@pytest.mark.slow
def test_no_national_phones_in_ordinary_text() -> None:
    """The ordinary-text corpus of the detector tests (the hub's source, README and docs/, the MCP SDK's source, package
    manifests and a lockfile, JSON log records: about 2.7 million characters), with three regions: the only
    phone numbers are the examples the hub's own documentation gives."""
    from tests.test_guardrails_detectors import _corpus

    examples = {value for value, kind in PERSONAL.values() if kind == "phone"}
    found = [(name, text[m.start : m.end]) for name, text in _corpus() for m in detectors.find(text, ["phone"])]
    assert {value for _, value in found} <= examples, found
