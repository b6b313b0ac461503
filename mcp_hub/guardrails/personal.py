"""Personal data, found by pattern and confirmed by a validator (not by a loose regex alone).

- `card_number`: 13-19 digits (single spaces or dashes between groups allowed) with the prefix and
  length of a card network (Visa, Mastercard, American Express, Discover, JCB, Diners, UnionPay,
  Maestro) and a valid Luhn check digit (`stdnum.luhn`). The prefix rule keeps millisecond timestamps,
  order numbers and other Luhn-valid digit runs out;
- `iban`: a country code, two check digits and the country's own structure, checked by
  `stdnum.iban` (mod 97 and the per-country format);
- `national_id`: identity numbers in the formats that carry a check (so that an arbitrary number
  cannot pass): US social security numbers written NNN-NN-NNNN (`stdnum.us.ssn`), Spanish DNI
  (`stdnum.es.dni`), Italian codice fiscale (`stdnum.it.codicefiscale`), Finnish HETU
  (`stdnum.fi.hetu`), Swedish personnummer written YYMMDD-NNNN (`stdnum.se.personnummer`);
- `phone`: numbers written in international form (+CC ...), that `phonenumbers` says are valid
  numbers of that country; and, for the regions the hub is told (`[guardrails] regions`, by default
  the locale's country), numbers in those regions' national form (`(650) 253-0000`, `07911 123456`,
  `030 90182044`) that are valid there and grouped as that region writes them (`phonenumbers`'
  STRICT_GROUPING leniency), written with at least one separator (space, dash, dot, slash or
  parentheses) and 7 to 15 digits: a bare run of digits (an order number, a timestamp) is not
  reported, nor an IPv4 address, nor a date or a version (not grouped as a phone number is);
- `email`: a mailbox `local@domain.tld` with a letters-only top-level domain (not the user of a URL,
  `ssh://git@host/`, nor of an scp-style address, `git@github.com:owner/repo.git`).

Digits and letters adjacent to a candidate disqualify it (a card number inside a longer number is not one).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable

import phonenumbers
from stdnum import iban, luhn
from stdnum.es import dni
from stdnum.fi import hetu
from stdnum.it import codicefiscale
from stdnum.se import personnummer
from stdnum.us import ssn

from mcp_hub.guardrails.matches import Match

_CARD = re.compile(r"\d(?<![\w.+-]\d)[\d -]{11,}\d(?![\w-])")
"""A run of digits, spaces and dashes (one fast pass); `_GROUPED` finds card numbers written within it.

This pattern and the next two start with a character class and look behind it (a digit not preceded by a word
character, rather than "not after a word character, a digit"): the regular expression engine then skips to the
candidates' first characters in C, which takes half the time or less on long texts."""
_GROUPED = re.compile(r"(?<!\d)(?:\d[ -]?){12,18}\d(?!\d)")
_CARD_NETWORKS = re.compile(
    r"4\d{12}(?:\d{3}){0,2}"  # Visa: 13, 16, 19
    r"|(?:5[1-5]\d{2}|222[1-9]|22[3-9]\d|2[3-6]\d{2}|27[01]\d|2720)\d{12}"  # Mastercard: 16
    r"|3[47]\d{13}"  # American Express: 15
    r"|(?:6011|65\d{2}|64[4-9]\d)\d{12,15}"  # Discover: 16-19
    r"|35(?:2[89]|[3-8]\d)\d{12,15}"  # JCB: 16-19
    r"|3(?:0[0-5]|[689]\d)\d{11,16}"  # Diners: 14-19
    r"|62\d{14,17}"  # UnionPay: 16-19
    r"|(?:5018|5020|5038|6304|6759|676[1-3])\d{8,15}"  # Maestro: 12-19
)
_IBAN = re.compile(r"[A-Z](?<!\w[A-Z])[A-Z]\d{2}(?: ?[A-Z0-9]){11,30}(?![\w])")
_PHONE_CANDIDATE = re.compile(r"(?<![\w+])\+\s?\d[\d\s().\-/]{5,24}\d(?:\s?(?:ext\.?|x|#)\s?\d{1,6})?")
"""Where a number in international form may be: a "+", digits and the separators phone numbers are written with."""
_NATIONAL_PHONE = re.compile(r"[(\d](?<![\w+./-][(\d])(?<!\d:[(\d])[\d ().\-/]{5,22}\d(?![\w:/]|[.\-]\d)")
"""Where a number in national form may be: digits (an opening parenthesis first, maybe) and the separators,
not inside a word, a longer number, a path, a time or a version (`v1.2.3`, `10.0.0.1`, `12:30:45`); after a
label's colon it may (`phone:07911 123456`)."""
_SEPARATED = re.compile(r"\d[ ().\-/]+\d")
_NOT_PHONE = re.compile(r"\d{1,3}(?:\.\d{1,3}){3}|\d{4}-\d\d-\d\d|\d\d?([./-])\d\d?\1\d{2,4}")
"""An IPv4 address (some are valid numbers written with dots, in Germany say) and a date (2026-11-25, 25.11.2026,
11/25/2026): never a phone number, and common in data, so told apart before `phonenumbers` is asked."""
_STRICT = phonenumbers.Leniency.STRICT_GROUPING
_EMAIL = re.compile(
    r"(?<![\w.%+-])(?<!://)[A-Za-z0-9._%+-]{1,64}@(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z]{2,24}"
    r"(?![\w-]|:[\w~/])"
)
"""Not a URL's user (`ssh://git@host/...`) nor an scp-style address (`git@github.com:owner/repo.git`)."""
_NATIONAL = re.compile(
    r"\d(?<![\w-]\d)(?:(?P<ssn>\d{2}-\d{2}-\d{4})|(?P<dni>\d{7}-?[A-Z])|(?P<hetu>\d{5}[-+A]\d{3}[0-9A-Y])"
    r"|(?P<personnummer>\d{5}[-+]\d{4}))(?![\w-])"
    r"|[A-Z](?<!\w[A-Z])(?P<codicefiscale>[A-Z]{5}\d{2}[A-Z]\d{2}[A-Z]\d{3}[A-Z])(?!\w)"
)
"""One pass for every format; the group that matched names the validator (of the whole match: each group leaves
out the first character, which the lookbehind follows)."""
_VALIDATORS: dict[str, Callable[[str], bool]] = {
    "ssn": ssn.is_valid,
    "dni": dni.is_valid,
    "hetu": hetu.is_valid,
    "personnummer": personnummer.is_valid,
    "codicefiscale": codicefiscale.is_valid,
}


def find_cards(text: str) -> list[Match]:
    found: list[Match] = []
    for run in _CARD.finditer(text):
        for m in _GROUPED.finditer(run.group()):
            digits = m.group().replace(" ", "").replace("-", "")
            if _CARD_NETWORKS.fullmatch(digits) and luhn.is_valid(digits):
                found.append(Match("card", "card_number", run.start() + m.start(), run.start() + m.end()))
    return found


def find_ibans(text: str) -> list[Match]:
    return [Match("iban", "iban", m.start(), m.end()) for m in _IBAN.finditer(text) if iban.is_valid(m.group())]


def find_national_ids(text: str) -> list[Match]:
    return [
        Match("national_id", "national_id", m.start(), m.end())
        for m in _NATIONAL.finditer(text)
        if m.lastgroup is not None and _VALIDATORS[m.lastgroup](m.group())
    ]


def phone_regions(regions: tuple[str, ...]) -> tuple[str, ...]:
    """The regions among `regions` that `phonenumbers` knows (a locale's country it has no plan for is left out)."""
    return tuple(region for region in regions if region in phonenumbers.SUPPORTED_REGIONS)


def find_phones(text: str, regions: tuple[str, ...] = ()) -> list[Match]:
    """`phonenumbers`' matcher, run only where a number may be (it is slow on long texts: about 1 s a
    megabyte): in international form everywhere, in national form for each of `regions`."""
    found: list[Match] = []
    if "+" in text:
        for candidate in _PHONE_CANDIDATE.finditer(text):
            start = candidate.start()
            for m in phonenumbers.PhoneNumberMatcher(candidate.group(), None, leniency=phonenumbers.Leniency.VALID):
                found.append(Match("phone", "phone", start + m.start, start + m.end))
    if regions:
        for candidate in _NATIONAL_PHONE.finditer(text):
            number = candidate.group()
            if not 7 <= sum(c.isdigit() for c in number) <= 15 or not _SEPARATED.search(number):
                continue
            if _NOT_PHONE.fullmatch(number):
                continue
            start = candidate.start()
            spans = {(start + s, start + e) for region in regions for s, e in _national(number, region)}
            found += [Match("phone", "phone", s, e) for s, e in sorted(spans)]
    return found


@functools.lru_cache(maxsize=4096)
def _national(number: str, region: str) -> tuple[tuple[int, int], ...]:
    """The spans of the numbers `phonenumbers` finds in a candidate in `region`'s national form (about 60 us a
    candidate and region: kept for the candidates that come again, as in logs and tables)."""
    return tuple((m.start, m.end) for m in phonenumbers.PhoneNumberMatcher(number, region, leniency=_STRICT))


def find_emails(text: str) -> list[Match]:
    if "@" not in text:
        return []
    return [Match("email", "email", m.start(), m.end()) for m in _EMAIL.finditer(text)]
