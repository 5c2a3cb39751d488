"""Who may do what through the API: per-user tokens with a role, pure rules (no I/O here).

- viewer reads (findings, actions, tickets, audit, jobs, topology);
- operator also approves and resolves;
- admin also manages tokens.

A token is 256 random bits, shown once at creation; the state file keeps only its SHA-256. A slow password hash
(bcrypt, scrypt) protects guessable secrets; a 256-bit random token cannot be guessed, and a fast hash lets every
request be checked by one indexed lookup. The configured service token (`api.token`) is an admin credential for
automation and for creating the first user token; its actor is `service-token`. The actor in the audit log always
comes from the credential, never from a request header.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from enum import IntEnum

TOKEN_PREFIX = "fabricd_"  # recognisable in a secret scanner, and in a config file where it does not belong
SERVICE_ACTOR = "service-token"
ANONYMOUS = "anonymous"


class Role(IntEnum):
    viewer = 1
    operator = 2
    admin = 3

    @classmethod
    def parse(cls, text: str) -> Role:
        try:
            return cls[text]
        except KeyError:
            raise ValueError(f"unknown role {text!r}; use viewer, operator or admin") from None


@dataclass(frozen=True)
class Principal:
    actor: str  # what the audit log records: "user:<name>", SERVICE_ACTOR or ANONYMOUS
    role: Role

    def may(self, needed: Role) -> bool:
        return self.role >= needed


def new_token() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


USER_PATTERN = r"^[A-Za-z0-9._@-]{1,64}$"


def valid_user(name: str) -> bool:
    """A user name for the audit log: ASCII letters, digits and . _ @ - (an e-mail or a login), at most 64."""
    return re.fullmatch(USER_PATTERN, name) is not None


def principal_for(
    token: str, service_token: str | None, lookup: Callable[[str], tuple[str, str] | None]
) -> Principal | None:
    """Who `token` is: the service token (admin), a live user token (`lookup(hash)` gives its user and role), or
    None. The API's bearer header and the page's login both come here."""
    if service_token is not None and hmac.compare_digest(token.encode(), service_token.encode()):
        return Principal(SERVICE_ACTOR, Role.admin)
    found = lookup(token_hash(token))
    return None if found is None else Principal(f"user:{found[0]}", Role[found[1]])


def proxy_principal(
    client: str | None,
    user: str | None,
    addresses: list[str],
    roles: dict[str, str],
    default_role: str | None,
) -> Principal | None:
    """The user a trusted proxy vouches for: only when the request comes from one of `addresses`, carries a valid
    user name, and that user has a role (`roles`, else `default_role`)."""
    if client is None or not user or not valid_user(user):
        return None
    try:
        ip = ipaddress.ip_address(client)
    except ValueError:
        return None
    if not any(ip in ipaddress.ip_network(a, strict=False) for a in addresses):
        return None
    role = roles.get(user, default_role)
    return None if role is None else Principal(f"user:{user}", Role[role])
