"""Secrets: the detectors of Yelp's `detect-secrets`, high-entropy strings, and the hub's own secrets.

- Known formats, by the regular expressions of `detect-secrets`' plugins (used as a library: no
  baseline, no files, no network): AWS access keys, private key blocks, GitHub, GitLab, Slack, Stripe,
  OpenAI, PyPI, npm, SendGrid, Twilio, Discord, Mailchimp, Telegram, Square and Azure storage keys,
  JSON web tokens, passwords in URLs; and three formats it has no plugin for (`_OWN`): Anthropic and
  Google API keys, GitHub fine-grained tokens. A private key match runs from its BEGIN line to its END
  line. A match covers the whole token it lies in (`matches.whole_token`): a pattern that stops short
  (Stripe's first 24 characters, OpenAI's 20 after its marker, a JWT without its signature, a Slack
  token's lower-case part) does not leave the rest.
- `high_entropy`: a run of 24 to 256 characters of the base64 alphabet (letters, digits, + / _ -, and
  = as padding at its end: `key=<value>` is two tokens)
  with upper case, lower case and digits, whose Shannon entropy (`detect-secrets`' own measure, over
  its base64 alphabet) is above 4.5 bits per character, the plugin's default, and that does not look
  like a path or an identifier (no more than a third of it in runs of 5 or more lower-case letters),
  nor is a subresource-integrity digest (`sha512-...`, as in npm lockfiles and HTML `integrity`), nor
  is a path (a `/`-separated segment of 4 or more lower-case letters: `.../commit/<sha>`, `.../document/d/<id>`),
  nor lies in a `data:...;base64,` URI (plain or URL-encoded): an inline image is data.
  Why these bounds: below 24 characters a string cannot reach 4.5 bits by this measure; hex digests
  (git commits, sha256) and UUIDs use 16 symbols, so they never exceed 4 bits; longer runs are data
  (an image, an encoded file), not a credential; words, paths and URLs have long lower-case runs.
- `configured_secret`: the values of the hub's own secrets (API keys in `[auth]`, the env and header
  values of mounts), passed in by the caller; values shorter than 8 characters are ignored (they
  would match ordinary words).
"""

from __future__ import annotations

import re
import string
from collections.abc import Iterable

from detect_secrets.plugins.aws import AWSKeyDetector
from detect_secrets.plugins.azure_storage_key import AzureStorageKeyDetector
from detect_secrets.plugins.base import RegexBasedDetector
from detect_secrets.plugins.basic_auth import BasicAuthDetector
from detect_secrets.plugins.discord import DiscordBotTokenDetector
from detect_secrets.plugins.github_token import GitHubTokenDetector
from detect_secrets.plugins.gitlab_token import GitLabTokenDetector
from detect_secrets.plugins.high_entropy_strings import Base64HighEntropyString
from detect_secrets.plugins.jwt import JwtTokenDetector
from detect_secrets.plugins.mailchimp import MailchimpDetector
from detect_secrets.plugins.npm import NpmDetector
from detect_secrets.plugins.openai import OpenAIDetector
from detect_secrets.plugins.private_key import PrivateKeyDetector
from detect_secrets.plugins.pypi_token import PypiTokenDetector
from detect_secrets.plugins.sendgrid import SendGridDetector
from detect_secrets.plugins.slack import SlackDetector
from detect_secrets.plugins.square_oauth import SquareOAuthDetector
from detect_secrets.plugins.stripe import StripeDetector
from detect_secrets.plugins.telegram_token import TelegramBotTokenDetector
from detect_secrets.plugins.twilio import TwilioKeyDetector

from mcp_hub.guardrails.matches import Match, whole_token

DETECTOR = "secrets"

ENTROPY_LIMIT = 4.5
MIN_ENTROPY_LENGTH = 24
MAX_ENTROPY_LENGTH = 256
MIN_CONFIGURED_LENGTH = 8

_PLUGINS: tuple[tuple[str, RegexBasedDetector], ...] = (
    ("aws_access_key", AWSKeyDetector()),
    ("azure_storage_key", AzureStorageKeyDetector()),
    ("url_password", BasicAuthDetector()),
    ("discord_token", DiscordBotTokenDetector()),
    ("github_token", GitHubTokenDetector()),
    ("gitlab_token", GitLabTokenDetector()),
    ("jwt", JwtTokenDetector()),
    ("mailchimp_key", MailchimpDetector()),
    ("npm_token", NpmDetector()),
    ("openai_key", OpenAIDetector()),
    ("private_key", PrivateKeyDetector()),
    ("pypi_token", PypiTokenDetector()),
    ("sendgrid_key", SendGridDetector()),
    ("slack_token", SlackDetector()),
    ("square_token", SquareOAuthDetector()),
    ("stripe_key", StripeDetector()),
    ("telegram_token", TelegramBotTokenDetector()),
    ("twilio_key", TwilioKeyDetector()),
)
_OWN: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("anthropic_key", re.compile(r"sk-ant-[a-z]{3,8}\d{2}-[A-Za-z0-9_-]{32,}")),
    ("google_api_key", re.compile(r"AIza[0-9A-Za-z_-]{35}")),
    ("github_token", re.compile(r"github_pat_[A-Za-z0-9_]{22,}")),
)
"""Formats `detect-secrets` has no plugin for: Anthropic API keys (`sk-ant-api03-...`), Google API keys
(`AIza...`), GitHub's fine-grained personal access tokens (`github_pat_...`)."""
_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    *((kind, pattern) for kind, plugin in _PLUGINS for pattern in plugin.denylist),
    *_OWN,
)
_NEEDS: dict[re.Pattern[str], str] = {pattern: "/:_authToken=" for pattern in NpmDetector.denylist}
"""A literal a pattern cannot match without, looked for first: the npm pattern (`//.+/:_authToken=...`)
takes time quadratic in the length of a line with many `//` in it (seconds for a megabyte of URLs)."""
_IN_GROUP = frozenset((AWSKeyDetector.denylist[1], *BasicAuthDetector.denylist, *NpmDetector.denylist))
"""Patterns whose groups hold the secret (the rest of the match is its context: `aws_secret = "..."`, a URL)."""
_PRIVATE_KEY_END = re.compile(
    r"-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|---- END SSH2 ENCRYPTED PRIVATE KEY ----"
)
_BASE64 = Base64HighEntropyString(limit=ENTROPY_LIMIT)
_TOKEN = re.compile(r"(?<![A-Za-z0-9+/_-])[A-Za-z0-9+/_-]{" + str(MIN_ENTROPY_LENGTH) + ",}={0,2}")
"""A run of the base64 alphabets, `=` only as its padding: `token=<value>` is a name and a value."""
_DIGEST = re.compile(r"(?:sha1|sha256|sha384|sha512)-[A-Za-z0-9+/]+={0,2}\Z")
_PATH_SEGMENT = re.compile(r"(?:^|/)[a-z-]{4,}(?:/|$)")
_DATA_URI = re.compile(r"data(?::|%3A)[^\s,\"']*?(?:;|%3B)base64(?:,|%2C)[A-Za-z0-9+/=%_-]+", re.IGNORECASE)
_WORDY = re.compile(r"[a-z]{5,}")
_UPPER, _LOWER, _DIGITS = (
    frozenset(chars) for chars in (string.ascii_uppercase, string.ascii_lowercase, string.digits)
)


def find_secrets(text: str, known: re.Pattern[str] | None = None) -> list[Match]:
    found: list[Match] = []
    for kind, pattern in _PATTERNS:
        if pattern in _NEEDS and _NEEDS[pattern] not in text:
            continue
        for m in pattern.finditer(text):
            start, end = _secret_span(m) if pattern in _IN_GROUP else m.span()
            if kind == "private_key":
                block_end = _PRIVATE_KEY_END.search(text, end)
                start, end = _line_start(text, start), block_end.end() if block_end else end
            found.append(whole_token(text, Match(DETECTOR, kind, start, end)))
    found += [e for e in _high_entropy(text) if not any(f.start < e.end and e.start < f.end for f in found)]
    if known is not None:
        found += [Match(DETECTOR, "configured_secret", m.start(), m.end()) for m in known.finditer(text)]
    return found


def known_secrets(values: Iterable[str]) -> re.Pattern[str] | None:
    """One pattern for the hub's own secret values (those of `MIN_CONFIGURED_LENGTH` characters or more)."""
    kept = sorted({v for v in values if len(v) >= MIN_CONFIGURED_LENGTH}, key=len, reverse=True)
    return re.compile("|".join(re.escape(v) for v in kept)) if kept else None


def looks_random(token: str) -> bool:
    """Whether a base64-alphabet token passes the high-entropy tests (see the module docstring)."""
    if not MIN_ENTROPY_LENGTH <= len(token) <= MAX_ENTROPY_LENGTH:
        return False
    chars = frozenset(token)
    if not (chars & _UPPER and chars & _LOWER and chars & _DIGITS):
        return False
    if sum(len(run) for run in _WORDY.findall(token)) * 3 > len(token):
        return False
    return _BASE64.calculate_shannon_entropy(token) > ENTROPY_LIMIT


def _high_entropy(text: str) -> list[Match]:
    found = [
        Match(DETECTOR, "high_entropy", m.start(), m.end())
        for m in _TOKEN.finditer(text)
        if looks_random(m.group()) and not _DIGEST.match(m.group()) and not _PATH_SEGMENT.search(m.group())
    ]
    if found and "base64" in text.lower():
        data = [m.span() for m in _DATA_URI.finditer(text)]
        found = [f for f in found if not any(start <= f.start and f.end <= end for start, end in data)]
    return found


def _secret_span(m: re.Match[str]) -> tuple[int, int]:
    """The span of the secret itself: the last group that matched (a pattern's context around it is not
    the secret), else the whole match."""
    for group in range(m.re.groups, 0, -1):
        if m.group(group):
            return m.span(group)
    return m.span()


def _line_start(text: str, position: int) -> int:
    """A private key's header starts with dashes before "BEGIN": include them."""
    while position > 0 and text[position - 1] == "-":
        position -= 1
    return position
