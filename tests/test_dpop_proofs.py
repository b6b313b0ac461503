"""DPoP proofs in-process: the hub's proof maker (credentials/dpop.py) against its checker (auth/dpop.py), each
algorithm it signs with, a key kept and loaded again, which algorithm a mount picks, and nonce challenges read."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from mcp_hub.auth.dpop import ProofChecker
from mcp_hub.auth.refusal import Refusal
from mcp_hub.credentials.dpop import SIGNING_ALGORITHMS, ProofKey, algorithm_for, htu_of

pytestmark = pytest.mark.anyio

URL = "https://hub.example.com/mcp"


def claims_of(proof: str) -> dict[str, Any]:
    payload = proof.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))


def checker() -> ProofChecker:
    return ProofChecker(algorithms=("ES256", "PS256", "RS256"), max_age=60, leeway=5, resource=URL)


@pytest.mark.parametrize(
    "algorithm",
    [pytest.param(name, marks=[pytest.mark.slow] if name != "ES256" else []) for name in SIGNING_ALGORITHMS],
)  # an RSA key takes a second or more to make on a busy machine
async def test_a_proof_of_each_algorithm_is_taken_once_and_its_kept_key_proves_the_same(algorithm: str) -> None:
    key = ProofKey(algorithm)
    kept = ProofKey.from_private_jwk(key.private_jwk())
    assert kept.thumbprint == key.thumbprint
    proofs = checker()
    once = kept.proof("POST", URL + "?ignored=1", "the-token")
    await proofs.check(once, method="POST", url=URL, token="the-token", bound=key.thumbprint)
    with pytest.raises(Refusal, match="presented before"):
        await proofs.check(once, method="POST", url=URL, token="the-token", bound=key.thumbprint)
    with pytest.raises(Refusal, match="ath"):
        await proofs.check(key.proof("POST", URL, "other"), method="POST", url=URL, token="the-token", bound="x")


def test_which_algorithm_a_mount_proves_with() -> None:
    assert algorithm_for(["RS256", "ES256"], "auto") == "ES256"
    assert algorithm_for(["PS256"], "auto") == "PS256"
    assert algorithm_for(None, "auto") is None
    assert algorithm_for(["EdDSA"], "auto") is None  # none the hub signs with
    assert algorithm_for(None, "always") == "ES256"
    assert algorithm_for(["ES256"], "never") is None
    assert htu_of("https://a.example/mcp?x=1#f") == "https://a.example/mcp"


def test_a_nonce_challenge_is_told_from_other_refusals_and_its_nonce_goes_in_the_next_proof() -> None:
    key = ProofKey()
    body = json.dumps({"error": "use_dpop_nonce"}).encode()
    assert key.nonce_challenge(URL, 400, {"dpop-nonce": "n1"}, body)
    assert not key.nonce_challenge(URL, 400, {"dpop-nonce": "n1"}, b'{"error": "invalid_grant"}')
    assert not key.nonce_challenge(URL, 400, {}, body)  # no nonce handed: sending again would not help
    assert key.nonce_challenge(URL, 401, {"dpop-nonce": "n2", "www-authenticate": 'DPoP error="use_dpop_nonce"'})
    assert not key.nonce_challenge(URL, 401, {"dpop-nonce": "n3", "www-authenticate": 'DPoP error="invalid_token"'})
    proof = key.proof("GET", URL)
    claims = claims_of(proof)
    assert claims["nonce"] == "n3" and claims["htm"] == "GET" and "ath" not in claims
    other = key.proof("POST", "https://elsewhere.example/token")
    assert "nonce" not in claims_of(other)
