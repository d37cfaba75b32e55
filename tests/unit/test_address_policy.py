"""The webhook address policy without a network: every spelling of a non-public address is refused, public ones
pass, the allow-list admits what it names, and after DNS every resolved address must pass."""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Mapping, Sequence

import pytest
from pydantic import ValidationError

from researchcrew.net.address_policy import AddressPolicy, AddressRefused, ResolutionFailed, Resolver
from researchcrew.net.addresses import ip_literal, parse_allow_entry, refusal
from researchcrew.settings import Settings, WebhooksSettings

REFUSED = [
    # loopback, in every spelling inet_aton and URL parsers accept
    "http://127.0.0.1/hook",
    "http://127.0.0.1.:8080/hook",
    "http://127.1/",
    "http://127.0.1/",
    "http://2130706433/",
    "http://0x7f000001/",
    "http://0X7F000001/",
    "http://017700000001/",
    "http://0x7f.1/",
    "http://0177.0.0.01/",
    "http://127.255.255.254/",
    "http://[::1]/",
    "http://[0:0:0:0:0:0:0:1]/",
    "http://[::ffff:127.0.0.1]/",
    "http://[::ffff:7f00:1]/",
    "http://[0:0:0:0:0:ffff:127.0.0.1]/",
    "http://[::127.0.0.1]/",
    "http://[2002:7f00:1::]/",
    "http://[64:ff9b::7f00:1]/",
    "http://localhost/",
    "http://LOCALHOST./",
    "http://localhost:8080/hook",
    "http://api.localhost/",
    "http://ip6-localhost/",
    # unspecified
    "http://0.0.0.0/",
    "http://0/",
    "http://[::]/",
    # metadata and link-local
    "http://169.254.169.254/latest/meta-data/",
    "http://2852039166/",
    "http://0xa9fea9fe/",
    "http://[::ffff:169.254.169.254]/",
    "http://[64:ff9b::a9fe:a9fe]/",
    "http://metadata.google.internal/computeMetadata/v1/",
    "http://100.100.100.200/",
    "http://168.63.129.16/",
    "http://[fd00:ec2::254]/",
    "http://169.254.1.1/",
    "http://[fe80::1]/",
    "http://[fe80::1%25eth0]/",
    # private, shared, multicast, reserved, documentation
    "http://10.0.0.1/",
    "http://012.0.0.1/",
    "http://172.16.0.1/",
    "http://192.168.1.1/",
    "http://[::ffff:192.168.1.1]/",
    "http://[fd12:3456::1]/",
    "http://[fec0::1]/",
    "http://100.64.0.1/",
    "http://224.0.0.1/",
    "http://239.255.255.250/",
    "http://[ff02::1]/",
    "http://240.0.0.1/",
    "http://255.255.255.255/",
    "http://192.0.2.1/",
    "http://[2001:db8::1]/",
    "http://[2001::1]/",
    "http://[64:ff9b:1::a00:1]/",
    # user-info, schemes, hosts that are no names
    "http://user@127.0.0.1/",
    "http://user:password@hooks.example.com/",
    "https://token@hooks.example.com/",
    "http://hooks.example.com\\@127.0.0.1/",
    "ftp://hooks.example.com/",
    "file:///etc/passwd",
    "gopher://hooks.example.com/",
    "http://%31%32%37.0.0.1/",
    "http:///hook",
    "not a url",
]

ALLOWED = [
    "https://hooks.example.com/researchcrew",
    "http://hooks.example.com:8080/x?y=1",
    "https://xn--n-nga1b.example/",
    "https://ünï.example/",
    "http://93.184.216.34/",
    "http://1.1.1.1:8443/",
    "http://[2606:4700:4700::1111]/",
    "http://[::ffff:93.184.216.34]/",
    "http://[2002:5db8:d822::1]/",
    "http://8.8.8.8/",
    "http://1.2.3.4.5/",  # not an address in any spelling: a name, which delivery resolves and checks
]


@pytest.mark.parametrize("url", REFUSED)
def test_every_spelling_of_a_non_public_destination_is_refused(url: str) -> None:
    with pytest.raises(AddressRefused):
        AddressPolicy().check_url(url)


@pytest.mark.parametrize("url", ALLOWED)
def test_public_destinations_pass(url: str) -> None:
    AddressPolicy().check_url(url)


@pytest.mark.parametrize(
    "host",
    ["127.1", "2130706433", "0x7f000001", "017700000001", "0x7f.1", "0177.0.0.01", "10.0x10.1", "1.2.3", "0", "00"],
)
def test_ipv4_spellings_are_read_as_inet_aton_reads_them(host: str) -> None:
    expected = ipaddress.IPv4Address(socket.inet_aton(host))
    assert ip_literal(host) == expected


@pytest.mark.parametrize(
    "host", ["256.1.1.1", "1.2.3.4.5", "0x100000000", "08", "0x", "1.2.3.256", "hooks.example.com", ""]
)
def test_what_is_no_ipv4_address_is_not_read_as_one(host: str) -> None:
    assert ip_literal(host) is None


def test_refusals_name_the_reason_without_resolving_anything() -> None:
    with pytest.raises(AddressRefused, match=r"2130706433 \(127\.0\.0\.1\) is a loopback address"):
        AddressPolicy().check_url("http://2130706433/")
    with pytest.raises(AddressRefused, match="cloud metadata"):
        AddressPolicy().check_url("http://169.254.169.254/")
    with pytest.raises(AddressRefused, match="user name or password"):
        AddressPolicy().check_url("http://user@hooks.example.com/")
    assert refusal(ipaddress.ip_address("::ffff:10.1.2.3")) == "a private address inside an IPv6 address"
    assert refusal(ipaddress.ip_address("93.184.216.34")) is None


def test_the_allow_list_admits_networks_and_names_and_nothing_else() -> None:
    policy = AddressPolicy(["10.0.0.0/8", "127.0.0.1", "hooks.internal", "*.corp.example"])
    for url in (
        "http://10.1.2.3/",
        "http://167838211/",
        "http://[::ffff:10.1.2.3]/",
        "http://127.0.0.1:9000/",
        "http://2130706433/",
        "http://hooks.internal/",
        "http://HOOKS.internal./",
        "http://a.corp.example/",
    ):
        policy.check_url(url)
    for url in ("http://192.168.1.1/", "http://127.0.0.2/", "http://localhost/", "http://user@10.1.2.3/"):
        with pytest.raises(AddressRefused):
            policy.check_url(url)
    assert parse_allow_entry(" FD00::/8 ") == ipaddress.ip_network("fd00::/8")
    for wrong in ("10.0.0.0/33", "not a host!", "0x7f000001", ""):
        with pytest.raises(ValueError, match=r"."):
            parse_allow_entry(wrong)


def test_the_setting_reads_comma_separated_or_json_lists_and_refuses_nonsense(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("RESEARCHCREW_WEBHOOKS__ALLOW", "10.0.0.0/8, hooks.internal")
    assert Settings().webhooks.allow == ["10.0.0.0/8", "hooks.internal"]
    monkeypatch.setenv("RESEARCHCREW_WEBHOOKS__ALLOW", '["fd00::/8", "*.corp.example"]')
    assert Settings().webhooks.allow == ["fd00::/8", "*.corp.example"]
    monkeypatch.delenv("RESEARCHCREW_WEBHOOKS__ALLOW")
    assert Settings().webhooks.allow == []
    with pytest.raises(ValidationError, match="allow"):
        WebhooksSettings(allow=["10.0.0.0/33"])


def _resolver(answers: Mapping[str, Sequence[str]]) -> Resolver:
    async def resolve(host: str, port: int) -> Sequence[str]:
        if host not in answers:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return answers[host]

    return resolve


async def test_after_dns_every_resolved_address_must_be_public() -> None:
    answers = {
        "public.example": ["93.184.216.34", "2606:2800:220:1:248:1893:25c8:1946"],
        "rebound.example": ["127.0.0.1"],
        "mixed.example": ["93.184.216.34", "192.168.0.5"],
        "mapped.example": ["::ffff:169.254.169.254"],
        "hooks.internal": ["10.9.9.9"],
        "corp.example": ["10.0.0.7"],
    }
    policy = AddressPolicy(["hooks.internal", "10.0.0.0/29"], resolver=_resolver(answers))
    destination = await policy.resolve("https://public.example:8443/hook")
    assert [str(address) for address in destination.addresses] == answers["public.example"]  # IPv4 first
    assert (
        str(destination.url_for(destination.addresses[1])) == "https://[2606:2800:220:1:248:1893:25c8:1946]:8443/hook"
    )
    assert (destination.host_header, destination.server_name) == ("public.example:8443", "public.example")
    for host in ("rebound.example", "mixed.example", "mapped.example"):
        with pytest.raises(AddressRefused, match="resolves to"):
            await policy.resolve(f"http://{host}/")
    assert (await policy.resolve("http://hooks.internal/")).addresses == (ipaddress.ip_address("10.9.9.9"),)
    assert (await policy.resolve("http://corp.example/")).addresses == (ipaddress.ip_address("10.0.0.7"),)
    with pytest.raises(ResolutionFailed):
        await policy.resolve("http://unknown.example/")
    literal = await policy.resolve("http://1.1.1.1/x")  # a literal is not resolved: it is the address
    assert literal.addresses == (ipaddress.ip_address("1.1.1.1"),) and literal.server_name is None


async def test_a_resolver_that_does_not_answer_in_time_is_a_failure_not_a_refusal() -> None:
    async def hangs(host: str, port: int) -> Sequence[str]:
        await asyncio.sleep(30)
        return []

    with pytest.raises(ResolutionFailed):
        await AddressPolicy(resolve_timeout_s=0.05, resolver=hangs).resolve("http://slow.example/")
