"""Which addresses are public, whatever their spelling (pure functions, no I/O).

A host in a URL may spell an IP address in many ways that resolvers and browsers accept: ``2130706433``,
``0x7f000001``, ``017700000001``, ``127.1`` and ``0x7f.0.0.1`` are all 127.0.0.1 (the BSD ``inet_aton`` forms:
one to four parts, each decimal, octal with a leading ``0`` or hex with ``0x``); ``::ffff:127.0.0.1`` (IPv4-mapped),
``::127.0.0.1`` (IPv4-compatible), ``2002:7f00:1::`` (6to4) and ``64:ff9b::7f00:1`` (NAT64) carry it inside IPv6.
``ip_literal`` reads every one of them; ``refusal`` says why an address is not a public one (or None when it is),
looking inside IPv6 addresses that embed an IPv4 one.
"""

from __future__ import annotations

import ipaddress
import re

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

# Cloud instance-metadata and platform endpoints. Most are link-local or private anyway; Azure's wire server is a
# public address that only answers from inside a VM, so it is named here.
METADATA_ADDRESSES: frozenset[IPAddress] = frozenset(
    ipaddress.ip_address(address)
    for address in (
        "169.254.169.254",  # AWS, GCP, Azure, OpenStack, DigitalOcean, Oracle (IMDS)
        "169.254.170.2",  # AWS ECS task metadata
        "fd00:ec2::254",  # AWS IMDS over IPv6
        "100.100.100.200",  # Alibaba Cloud
        "168.63.129.16",  # Azure wire server
        "192.0.0.192",  # Oracle Cloud (legacy)
    )
)
# Names that mean this machine or a metadata service whatever DNS says (RFC 6761 reserves .localhost).
LOCAL_NAMES: frozenset[str] = frozenset(
    {
        "localhost",
        "localhost.localdomain",
        "ip6-localhost",
        "ip6-loopback",
        "metadata",
        "metadata.google.internal",
        "metadata.goog",
        "instance-data",
        "instance-data.ec2.internal",
    }
)

_NAT64 = ipaddress.ip_network("64:ff9b::/96")  # RFC 6052 well-known prefix: the IPv4 address is the last 32 bits
_NAT64_LOCAL = ipaddress.ip_network("64:ff9b:1::/48")  # RFC 8215 local-use NAT64: translates to anything
_COMPATIBLE = ipaddress.ip_network("::/96")  # deprecated IPv4-compatible IPv6 (::a.b.c.d)
_SHARED = ipaddress.ip_network("100.64.0.0/10")  # RFC 6598 carrier-grade NAT
_IPV4_PART = re.compile(r"^(0x[0-9a-f]+|0[0-7]*|[1-9][0-9]*)$")
_LABEL = re.compile(r"^(?!-)[a-z0-9_-]{1,63}(?<!-)$")


def _ipv4_part(part: str) -> int:
    if part.startswith("0x"):
        return int(part[2:], 16)
    return int(part, 8) if part.startswith("0") else int(part)


def _ipv4_spelling(host: str) -> ipaddress.IPv4Address | None:
    """``host`` read the way ``inet_aton`` reads it (``127.1``, ``0x7f000001``, ``017700000001``, ...), or None when
    it is not an IPv4 address in any of those forms. A trailing dot is allowed, as resolvers allow it."""
    parts = host.lower().removesuffix(".").split(".")
    if not 1 <= len(parts) <= 4 or not all(_IPV4_PART.match(part) for part in parts):
        return None
    values = [_ipv4_part(part) for part in parts]
    *leading, last = values
    if any(value > 255 for value in leading) or last >= 256 ** (5 - len(values)):
        return None
    number = 0
    for value in leading:
        number = number << 8 | value
    return ipaddress.IPv4Address(number << 8 * (4 - len(leading)) | last)


def ip_literal(host: str) -> IPAddress | None:
    """The IP address ``host`` spells (an IPv4 form ``inet_aton`` accepts, or IPv6 with or without brackets and
    zone), or None when ``host`` is a name."""
    text = host.strip().lower()
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    if ":" in text:
        try:
            return ipaddress.IPv6Address(text.split("%", 1)[0])  # the zone (fe80::1%eth0) does not change the scope
        except ValueError:
            return None
    return _ipv4_spelling(text)


def is_host_name(host: str) -> bool:
    """Whether ``host`` is a well-formed DNS name (letters, digits, ``-``, ``_``; IDNA already applied)."""
    labels = host.lower().removesuffix(".").split(".")
    return len(host) <= 253 and all(_LABEL.match(label) for label in labels)


def is_local_name(host: str) -> bool:
    """Whether ``host`` names this machine or a metadata service by convention (``localhost``, ``*.localhost``,
    ``metadata.google.internal``, ...), whatever DNS would answer."""
    name = host.lower().rstrip(".")
    return name in LOCAL_NAMES or name.endswith(".localhost")


def embedded_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 one carries: IPv4-mapped, IPv4-compatible, 6to4 or well-known NAT64."""
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if address in _NAT64 or (address in _COMPATIBLE and int(address) > 1):
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


def refusal(address: IPAddress) -> str | None:
    """Why ``address`` is not a public address (e.g. ``"a loopback address"``), or None when it is."""
    if isinstance(address, ipaddress.IPv6Address):
        inner = embedded_ipv4(address)
        if inner is not None and (reason := refusal(inner)) is not None:
            return f"{reason} inside an IPv6 address"
        if address.ipv4_mapped is not None:  # ::ffff:a.b.c.d is a.b.c.d (a dual-stack socket connects there)
            return None
        if address in _NAT64_LOCAL:
            return "a local-use NAT64 address"
    checks: tuple[tuple[bool, str], ...] = (
        (address.is_unspecified, "the unspecified address"),
        (address.is_loopback, "a loopback address"),
        (address in METADATA_ADDRESSES, "a cloud metadata address"),
        (address.is_link_local, "a link-local address"),
        (address.is_multicast, "a multicast address"),
        (isinstance(address, ipaddress.IPv4Address) and address in _SHARED, "a shared (carrier-grade NAT) address"),
        (address.is_private, "a private address"),
        (address.is_reserved, "a reserved address"),
        (isinstance(address, ipaddress.IPv6Address) and address.is_site_local, "a site-local address"),
        (not address.is_global, "not a public address"),
    )
    return next((reason for failed, reason in checks if failed), None)


def parse_allow_entry(entry: str) -> IPNetwork | str:
    """One allow-list entry: a network (``10.0.0.0/8``, ``fd00::/8``, ``10.1.2.3``) or a host name, lower-case
    (``hooks.internal``; ``*.corp.example`` for its subdomains). Raises ``ValueError`` saying what is wrong."""
    text = entry.strip().lower().rstrip(".")
    if not text:
        raise ValueError("an empty entry")
    try:
        return ipaddress.ip_network(text.strip("[]"), strict=False)
    except ValueError:
        pass
    if ip_literal(text) is not None:  # 127.1, 0x7f000001, ...: say it the plain way
        raise ValueError(f"{entry!r} spells an address unusually; write it as {ip_literal(text)}")
    if not is_host_name(text.removeprefix("*.")):
        raise ValueError(f"{entry!r} is neither a network (10.0.0.0/8, fd00::/8, 10.1.2.3) nor a host name")
    return text


__all__ = [
    "LOCAL_NAMES",
    "METADATA_ADDRESSES",
    "IPAddress",
    "IPNetwork",
    "embedded_ipv4",
    "ip_literal",
    "is_host_name",
    "is_local_name",
    "parse_allow_entry",
    "refusal",
]
