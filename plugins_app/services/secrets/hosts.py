"""A secret's allowedHosts: checked when set, matched against a request's host when it is sent."""

from __future__ import annotations

import ipaddress
import re

MAX_HOSTS = 20
LABEL = re.compile(r"(?!-)[a-z0-9-]{1,63}(?<!-)")


def _name_problem(name: str) -> str | None:
    if len(name) > 253:
        return "is over 253 characters"
    labels = name.split(".")
    if not all(LABEL.fullmatch(label) for label in labels):
        return "is not a host name (letters, digits and hyphens in dot-separated labels; no scheme, port or path)"
    return None


def normalize_host(entry) -> str:
    """One allowedHosts entry, lowercased; raises ValueError saying what is wrong with it."""
    if not isinstance(entry, str) or not entry.strip():
        raise ValueError("expected a non-empty host name")
    host = entry.strip().lower().rstrip(".")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        pass
    if host.startswith("*."):
        suffix = host[2:]
        problem = _name_problem(suffix)
        if problem:
            raise ValueError(f"{entry!r}: the part after *. {problem}")
        if "." not in suffix:
            raise ValueError(f"{entry!r}: *. needs a suffix of at least two labels (*.example.com, not *.com)")
        return host
    if "*" in host:
        raise ValueError(f"{entry!r}: a wildcard is only allowed as a leading *. (e.g. *.example.com)")
    problem = _name_problem(host)
    if problem:
        raise ValueError(f"{entry!r} {problem}")
    return host


def normalize_hosts(entries) -> list[str]:
    """The allowedHosts list checked: 1 to MAX_HOSTS valid entries, without repeats."""
    if not isinstance(entries, list) or not entries:
        raise ValueError("expected a non-empty array of host names (a secret must be sendable somewhere)")
    if len(entries) > MAX_HOSTS:
        raise ValueError(f"at most {MAX_HOSTS} hosts")
    clean = []
    for i, entry in enumerate(entries):
        try:
            clean.append(normalize_host(entry))
        except ValueError as exc:
            raise ValueError(f"item {i}: {exc}") from None
    return list(dict.fromkeys(clean))


def host_allowed(host: str, allowed: list[str]) -> bool:
    """`host` (a URL's host name as it is connected to) is one of `allowed`: the same name or address,
    or a subdomain of a *.suffix entry (not the suffix itself)."""
    host = host.strip("[]").lower().rstrip(".")
    try:
        host = str(ipaddress.ip_address(host))
    except ValueError:
        pass
    for entry in allowed:
        if entry.startswith("*."):
            if host.endswith(entry[1:]) and len(host) > len(entry) - 1:
                return True
        elif host == entry:
            return True
    return False
