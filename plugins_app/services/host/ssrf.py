"""The SSRF guard: which resolved addresses host.fetch and the platform bridge may connect to."""

from __future__ import annotations

import http.client
import ipaddress
import socket
import ssl
import time
from collections.abc import Iterable

# Cloud instance-metadata endpoints (AWS/GCP/Azure, AWS over IPv6, Alibaba).
METADATA_ADDRESSES = frozenset(ipaddress.ip_address(a) for a in (
    "169.254.169.254", "fd00:ec2::254", "100.100.100.200"))
NAT64 = ipaddress.ip_network("64:ff9b::/96")

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class Refused(Exception):
    """The name does not resolve, or resolves to an address plugins may not reach."""


class Unresolved(Refused):
    """The name does not resolve (perhaps only for now)."""


def _embedded_ipv4(ip: IPAddress) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address tunnels to (mapped, NAT64, 6to4, Teredo), if any."""
    if ip.version != 6:
        return None
    if ip.ipv4_mapped:
        return ip.ipv4_mapped
    if ip in NAT64:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    if ip.sixtofour:
        return ip.sixtofour
    if ip.teredo:
        return ip.teredo[1]
    return None


def why_blocked(ip: IPAddress) -> str | None:
    """Why a plugin may not reach `ip`, or None when it is a public address."""
    if ip in METADATA_ADDRESSES:
        return "a cloud metadata address"
    inner = _embedded_ipv4(ip)
    if inner is not None:
        reason = why_blocked(inner)
        if reason:
            return reason + f" (tunnelled as {ip})"
    # Most specific first: Python also counts loopback and link-local ranges as private.
    for flag, label in (("is_loopback", "loopback"), ("is_link_local", "link-local"),
                        ("is_unspecified", "unspecified"), ("is_multicast", "multicast"),
                        ("is_reserved", "reserved"), ("is_private", "private")):
        if getattr(ip, flag):
            return f"a {label} address"
    if not ip.is_global:
        return "not a public address"   # e.g. carrier-grade NAT 100.64.0.0/10, benchmarking ranges
    return None


def resolve(host: str, port: int) -> list[IPAddress]:
    """All addresses `host` resolves to (a literal address resolves to itself)."""
    try:
        return [ipaddress.ip_address(host)]
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise Unresolved(f"{host} does not resolve ({exc})") from None
    addresses: list[IPAddress] = []
    for *_, sockaddr in infos:
        ip = ipaddress.ip_address(str(sockaddr[0]).split("%", 1)[0])   # an IP's text, maybe with %scope
        if ip not in addresses:
            addresses.append(ip)
    if not addresses:
        raise Unresolved(f"{host} does not resolve")
    return addresses


def checked_addresses(host: str, port: int, *, allow_private: bool = False) -> list[IPAddress]:
    """Resolve once and check every address; the caller connects to these, never re-resolving."""
    addresses = resolve(host, port)
    if allow_private:
        return addresses
    for ip in addresses:
        reason = why_blocked(ip)
        if reason:
            shown = host if host == str(ip) else f"{host} (resolves to {ip})"
            raise Refused(f"{shown} is {reason}; plugins may only reach public addresses")
    return addresses


# --- an operator's allow list (the platform bridge) ------------------------------------------------

class AllowList:
    """Hosts an operator lets the hub reach: names (`.example.com` also matches its subdomains),
    addresses and CIDR networks. A listed name is trusted whatever it resolves to."""

    def __init__(self, entries: Iterable[str]):
        self.names: set[str] = set()
        self.suffixes: list[str] = []
        self.networks: list[ipaddress.IPv4Network | ipaddress.IPv6Network] = []
        for entry in entries:
            entry = entry.strip().strip("[]").lower().rstrip(".")
            if not entry:
                continue
            try:
                self.networks.append(ipaddress.ip_network(entry, strict=False))
            except ValueError:
                if "/" in entry or any(c.isspace() or c in ":@" for c in entry):
                    raise ValueError(f"{entry!r} is not a host name, an address or a network") from None
                if entry.startswith("."):
                    self.suffixes.append(entry)
                else:
                    self.names.add(entry)

    def allows_name(self, host: str) -> bool:
        host = host.lower().rstrip(".")
        return host in self.names or any(host.endswith(s) or host == s[1:] for s in self.suffixes)

    def _listed(self, ip: IPAddress) -> bool:
        return any(ip in network for network in self.networks)

    def why_refused(self, ip: IPAddress, *, name_listed: bool = False) -> str | None:
        """Why the hub may not connect to `ip`, or None when the list allows it."""
        if ip.version == 6 and ip.ipv4_mapped:
            ip = ip.ipv4_mapped   # the connection goes to the IPv4 address
        inner = _embedded_ipv4(ip)
        for candidate in (ip, inner):
            if candidate is not None and (candidate in METADATA_ADDRESSES or candidate.is_unspecified
                                          or candidate.is_multicast):
                return "an address the hub never connects to"
        if name_listed:
            return None
        if not self._listed(ip) or (inner is not None and not self._listed(inner)):
            return "not an allowed address"
        return None


def allowed_addresses(host: str, port: int, allowed: AllowList) -> list[IPAddress]:
    """Resolve once and check every address against `allowed`; the caller connects to these only."""
    addresses = resolve(host, port)
    name_listed = allowed.allows_name(host)
    for ip in addresses:
        reason = allowed.why_refused(ip, name_listed=name_listed)
        if reason:
            shown = host if host == str(ip) else f"{host} (resolves to {ip})"
            raise Refused(f"{shown} is {reason}")
    return addresses


# --- connecting to a checked address ---------------------------------------------------------------

class PinnedHTTPConnection(http.client.HTTPConnection):
    """Connects to `address`, one the guard checked, while speaking to the URL's host name."""

    address: str

    def connect(self) -> None:
        self.sock = socket.create_connection((self.address, self.port), self.timeout)


class PinnedHTTPSConnection(http.client.HTTPSConnection):
    """As PinnedHTTPConnection, verifying the certificate against the URL's host name."""

    address: str
    _context: ssl.SSLContext   # set by HTTPSConnection.__init__; typeshed does not declare it

    def connect(self) -> None:
        sock = socket.create_connection((self.address, self.port), self.timeout)
        self.sock = self._context.wrap_socket(sock, server_hostname=self.host)


def connect_pinned(scheme: str, host: str, port: int, addresses: list[IPAddress],
                   deadline: float, context=None) -> http.client.HTTPConnection:
    """A connection to the first of `addresses` that accepts one before `deadline` (time.monotonic());
    raises the last OSError when none does."""
    last_error: OSError | None = None
    for ip in addresses:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        conn: PinnedHTTPConnection | PinnedHTTPSConnection
        if scheme == "https":
            conn = PinnedHTTPSConnection(host, port, timeout=remaining, context=context)
        else:
            conn = PinnedHTTPConnection(host, port, timeout=remaining)
        conn.address = str(ip)
        try:
            conn.connect()
            return conn
        except OSError as exc:
            conn.close()
            last_error = exc
    raise last_error or TimeoutError("timed out")
