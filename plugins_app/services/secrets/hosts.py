"""A secret's allowedHosts: checked when set, matched against a request's scheme, host and port when it is sent.

An entry binds a scheme and a port as well as a host: `api.example.com` is https on 443 only;
`api.example.com:8443` https on 8443; `http://127.0.0.1:8080` plain http on 8080 (`http://host` alone is
port 80). Stored and answered in that form: a bare host for https on 443, `scheme://host:port` otherwise."""

from __future__ import annotations

import ipaddress
import re
from typing import NamedTuple

MAX_HOSTS = 20
LABEL = re.compile(r"(?!-)[a-z0-9-]{1,63}(?<!-)")
DEFAULT_PORTS = {"https": 443, "http": 80}
SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)://")


class Target(NamedTuple):
    """Where a request goes (or an entry allows): scheme, host as normalize_host writes it, port."""

    scheme: str
    host: str
    port: int

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}"


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


def parse_entry(entry) -> Target:
    """One allowedHosts entry read: [http:// or https://]host[:port], the scheme https and its port by
    default; raises ValueError saying what is wrong with it."""
    if not isinstance(entry, str) or not entry.strip():
        raise ValueError("expected a non-empty host name")
    text, scheme = entry.strip(), "https"
    if match := SCHEME.match(text):
        scheme, text = match.group(1).lower(), text[match.end():]
        if scheme not in DEFAULT_PORTS:
            raise ValueError(f"{entry!r}: the scheme may be https (the default) or http, not {scheme}")
    if any(c in text for c in "/?#@\\") or not text:
        raise ValueError(f"{entry!r}: a host with an optional scheme and port only (no path, query or user)")
    port = DEFAULT_PORTS[scheme]
    host = text
    try:
        ipaddress.ip_address(text)   # a bare IPv6 address: its colons are not a port
    except ValueError:
        if text.startswith("["):
            host, _, rest = text[1:].partition("]")
            port_text = rest[1:] if rest.startswith(":") else None
            if rest and port_text is None:
                raise ValueError(f"{entry!r} is not a host name or [address]:port") from None
        else:
            host, _, port_text = text.partition(":") if ":" in text else (text, "", None)
        if port_text is not None:
            if not port_text.isdigit() or not 0 < int(port_text) < 65536:
                raise ValueError(f"{entry!r}: the port must be a number from 1 to 65535") from None
            port = int(port_text)
    return Target(scheme, normalize_host(host), port)


def format_entry(target: Target) -> str:
    """The stored form: a bare host for https on 443, scheme://host:port otherwise."""
    return target.host if (target.scheme, target.port) == ("https", 443) else str(target)


def normalize_hosts(entries, places: list[str] | None = None) -> list[str]:
    """The allowedHosts list checked: 1 to MAX_HOSTS valid entries, without repeats. A bad entry is named
    by its place: `places[i]` when given (the admin's "line 3"), else the array's "item i"."""
    if not isinstance(entries, list) or not entries:
        raise ValueError("expected a non-empty array of hosts (a secret must be sendable somewhere)")
    if len(entries) > MAX_HOSTS:
        raise ValueError(f"at most {MAX_HOSTS} hosts")
    clean = []
    for i, entry in enumerate(entries):
        try:
            clean.append(format_entry(parse_entry(entry)))
        except ValueError as exc:
            place = places[i] if places and i < len(places) else f"item {i}"
            raise ValueError(f"{place}: {exc}") from None
    return list(dict.fromkeys(clean))


def target_allowed(target: Target, allowed: list[str]) -> bool:
    """`target` (the scheme, host name as it is connected to, and port of a request) is allowed by one of
    `allowed`: the same scheme and port, and the same name or address or a subdomain of a *.suffix entry
    (not the suffix itself)."""
    host = target.host.strip("[]").lower().rstrip(".")
    try:
        host = str(ipaddress.ip_address(host))
    except ValueError:
        pass
    for text in allowed:
        try:
            entry = parse_entry(text)
        except ValueError:
            continue   # (stored entries were checked when set)
        if (entry.scheme, entry.port) != (target.scheme, target.port):
            continue
        if entry.host.startswith("*."):
            if host.endswith(entry.host[1:]) and len(host) > len(entry.host) - 1:
                return True
        elif host == entry.host:
            return True
    return False
