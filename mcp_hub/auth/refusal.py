"""`Refusal`: why a request's credentials are not taken, as RFC 6750 says to answer it.

401 `invalid_token` for a token that is missing, malformed, expired, not for this resource or
not verifiable; 401 `invalid_dpop_proof` for a DPoP proof that is missing or wrong (RFC 9449);
403 `insufficient_scope` for a valid token without a scope the hub requires.
The description is for the client's developer; it never contains the token.
"""

from __future__ import annotations


class Refusal(Exception):
    """A request's credentials refused; `error` None: none were presented (RFC 6750 §3.1: no error code)."""

    def __init__(
        self,
        description: str,
        *,
        error: str | None = "invalid_token",
        status: int = 401,
        scopes: tuple[str, ...] | None = None,
        scheme: str | None = None,
    ) -> None:
        super().__init__(description)
        self.description = description
        self.error = error
        self.status = status
        self.scopes = scopes
        """The scopes a token must carry for this request (its challenge's `scope`); None: the hub's required ones."""
        self.scheme = scheme
        """"DPoP": the challenge is DPoP's (a proof refused, or a bound token expected; RFC 9449 section 7.1);
        None: the scheme the client used, or the hub's default."""

    @classmethod
    def insufficient_scope(cls, missing: list[str], *, needed: tuple[str, ...] | None = None) -> Refusal:
        """A valid token without the scopes `missing`; `needed`: every scope the request needs, if not only the
        hub's required ones (a policy rule's, for the item called)."""
        return cls(
            f"the token lacks the scope {', '.join(missing)}", error="insufficient_scope", status=403, scopes=needed
        )


class Unavailable(Exception):
    """The authorization server could not be reached or answered nonsense (a 503 for the client, not a 401)."""
