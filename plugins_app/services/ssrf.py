"""The SSRF guard for host.fetch: which resolved addresses a plugin may reach."""

from __future__ import annotations

import ipaddress
import socket

# Cloud instance-metadata endpoints (AWS/GCP/Azure, AWS over IPv6, Alibaba).
METADATA_ADDRESSES = frozenset(ipaddress.ip_address(a) for a in (
    "169.254.169.254", "fd00:ec2::254", "100.100.100.200"))
NAT64 = ipaddress.ip_network("64:ff9b::/96")

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class Refused(Exception):
    """The name does not resolve, or resolves to an address plugins may not reach."""


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
        raise Refused(f"{host} does not resolve ({exc})") from None
    addresses: list[IPAddress] = []
    for *_, sockaddr in infos:
        ip = ipaddress.ip_address(sockaddr[0].split("%", 1)[0])
        if ip not in addresses:
            addresses.append(ip)
    if not addresses:
        raise Refused(f"{host} does not resolve")
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
