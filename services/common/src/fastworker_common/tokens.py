"""The shared tokens a server accepts: its own, and while the token is being rotated, the
next one (``--next-auth-token``), so that clients and subworkers can move to the new
token one by one with nothing refused (docs/guides/operations.md, "Rotate the token").

Every offered token is compared with each accepted one in constant time, all of them
every time, so neither which token matched nor how much of it did shows in the timing.
"""

from __future__ import annotations

import hmac


class Tokens:
    def __init__(self, current: str, next_token: str | None = None) -> None:
        if not current:
            raise ValueError("an auth token cannot be empty")
        self.current = current  # what this process itself sends to its peers
        self._accepted = tuple(t.encode() for t in (current, next_token) if t)

    @classmethod
    def of(cls, auth: str | Tokens | None) -> Tokens | None:
        return auth if isinstance(auth, Tokens) or auth is None else cls(auth)

    def accepts(self, offered: str | bytes | None) -> bool:
        if offered is None:
            return False
        given = offered.encode() if isinstance(offered, str) else offered
        matched = False
        for accepted in self._accepted:
            matched |= hmac.compare_digest(given, accepted)
        return matched
