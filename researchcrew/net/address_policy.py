"""Where the service may send a request of its own (webhooks): public addresses only, unless allowed.

A URL a user gives us is a request we make from inside the deployment, so it must not reach what only the
deployment can reach (this machine, the private network, a cloud's metadata service). Two checks:

* ``check_url`` — static, at creation: an http(s) URL without user-info, whose host is a well-formed name or an
  IP literal in any spelling (see ``researchcrew.net.addresses``), not a local name (``localhost``, ...), and not a
  non-public address. No DNS: a name may resolve differently later, and creation stays offline.
* ``resolve`` — at delivery: the static check again, then the host resolved (``loop.getaddrinfo``, under a
  timeout); **every** address it resolves to must be public. The caller then connects to one of those vetted
  addresses (``Destination.url_for``), not to the name, so a DNS answer that changes between the check and the
  connection (rebinding) changes nothing.

A deployment allows the private hosts it really wants with ``webhooks.allow``: networks (``10.0.0.0/8``) admit
addresses, names (``hooks.internal``, ``*.corp.example``) admit a host whatever it resolves to.

The reasons in ``AddressRefused`` are for the person who gave the URL at creation; at delivery the caller reports
one uniform message, so that the outcome of a delivery says nothing about the network behind it.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass

import httpx

from researchcrew.errors import ResearchCrewError
from researchcrew.net.addresses import (
    IPAddress,
    IPNetwork,
    ip_literal,
    is_host_name,
    is_local_name,
    parse_allow_entry,
    refusal,
)

Resolver = Callable[[str, int], Awaitable[Sequence[str]]]
ALLOW_HINT = "webhooks go to public addresses only; a deployment allows others with RESEARCHCREW_WEBHOOKS__ALLOW"


class AddressRefused(ResearchCrewError, ValueError):
    """A URL the policy does not let the service call; the message says why (for the URL's author only)."""


class ResolutionFailed(ResearchCrewError):
    """A host name did not resolve (no such name, no answer in time): a delivery failure, not a refusal."""


async def system_resolver(host: str, port: int) -> list[str]:
    """The addresses ``host`` resolves to, through the event loop's ``getaddrinfo`` (thread pool, not blocking)."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in infos]


@dataclass(frozen=True)
class Destination:
    """A vetted URL and the addresses to connect to instead of resolving its host again (IPv4 first)."""

    url: httpx.URL
    addresses: tuple[IPAddress, ...]

    @property
    def host_header(self) -> str:
        """The ``Host`` header the URL would have had (host, and port when not the scheme's default)."""
        return self.url.netloc.decode("ascii")

    @property
    def server_name(self) -> str | None:
        """The TLS server name (SNI, and the name the certificate is checked against) for https to a host name."""
        return self.url.host if self.url.scheme == "https" and ip_literal(self.url.host) is None else None

    def url_for(self, address: IPAddress) -> httpx.URL:
        """The URL with its host replaced by ``address`` (the connection goes there, and nowhere else)."""
        return self.url.copy_with(host=str(address))


class AddressPolicy:
    """Public addresses only, plus what ``allow`` names (networks and host names)."""

    def __init__(
        self, allow: Iterable[str] = (), *, resolve_timeout_s: float = 5.0, resolver: Resolver | None = None
    ) -> None:
        entries = [parse_allow_entry(entry) for entry in allow]
        self.networks: tuple[IPNetwork, ...] = tuple(e for e in entries if not isinstance(e, str))
        self.names: frozenset[str] = frozenset(e for e in entries if isinstance(e, str))
        self.resolve_timeout_s = resolve_timeout_s
        self._resolver = resolver or system_resolver

    def _allows_name(self, host: str) -> bool:
        name = host.lower().rstrip(".")
        return name in self.names or any(
            allowed.startswith("*.") and name.endswith(allowed[1:]) for allowed in self.names
        )

    def _address_refusal(self, address: IPAddress) -> str | None:
        candidates = [address]
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            candidates.append(address.ipv4_mapped)
        if any(candidate in network for candidate in candidates for network in self.networks):
            return None
        return refusal(address)

    def check_url(self, url: str | httpx.URL) -> httpx.URL:
        """The parsed URL when it passes the static checks; ``AddressRefused`` saying why not otherwise."""
        try:
            parsed = httpx.URL(url)
        except httpx.InvalidURL:
            raise AddressRefused("not a valid URL") from None
        if parsed.scheme not in ("http", "https"):
            raise AddressRefused(f"only http and https URLs are allowed, not {parsed.scheme or 'no scheme'!r}")
        if parsed.userinfo:
            raise AddressRefused("a URL with a user name or password (user@host) is not allowed")
        host = parsed.host
        if not host:
            raise AddressRefused("the URL names no host")
        address = ip_literal(host)
        if address is None and self._allows_name(host):
            return parsed
        if address is not None:
            reason = self._address_refusal(address)
            if reason is not None:
                spelled = host if host == str(address) else f"{host} ({address})"
                raise AddressRefused(f"{spelled} is {reason}: {ALLOW_HINT}")
            return parsed
        if not is_host_name(parsed.raw_host.decode("ascii")):
            raise AddressRefused(f"{host!r} is not a valid host name")
        if is_local_name(host):
            raise AddressRefused(f"{host} names this machine or a metadata service: {ALLOW_HINT}")
        return parsed

    async def resolve(self, url: str | httpx.URL) -> Destination:
        """The static checks, then every address the host resolves to vetted. ``AddressRefused`` when the policy
        says no, ``ResolutionFailed`` when the name does not resolve in time."""
        parsed = self.check_url(url)
        literal = ip_literal(parsed.host)
        if literal is not None:
            return Destination(parsed, (literal,))
        port = parsed.port or (443 if parsed.scheme == "https" else 80)
        try:
            async with asyncio.timeout(self.resolve_timeout_s):
                found = await self._resolver(parsed.raw_host.decode("ascii"), port)
        except (OSError, TimeoutError) as error:  # socket.gaierror is an OSError
            raise ResolutionFailed(f"{parsed.host} did not resolve: {type(error).__name__}") from error
        addresses = [ip_literal(text) for text in found]
        if not addresses or any(address is None for address in addresses):
            raise ResolutionFailed(f"{parsed.host} resolved to nothing usable")
        vetted = tuple(dict.fromkeys(address for address in addresses if address is not None))
        if not self._allows_name(parsed.host):
            for address in vetted:
                reason = self._address_refusal(address)
                if reason is not None:
                    raise AddressRefused(f"{parsed.host} resolves to {reason}")
        return Destination(parsed, tuple(sorted(vetted, key=lambda address: address.version)))


__all__ = ["ALLOW_HINT", "AddressPolicy", "AddressRefused", "Destination", "ResolutionFailed", "system_resolver"]
