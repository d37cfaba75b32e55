"""The webhook address policy at delivery, against a loopback listener: by default nothing reaches it, whatever the
spelling of its address (and a job stored before the policy existed is refused too); allowed through
``webhooks.allow``, every spelling does. The POST goes to the address that was vetted, not to a second lookup of the
name, and every failure to deliver reads the same, so the stored outcome is no port scanner."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from researchcrew.jobs._store import JobStore
from researchcrew.jobs.api import Jobs
from researchcrew.jobs.contracts import JobQuestion, JobSpec, RunInfo
from researchcrew.jobs.webhooks import FAILED, REFUSED, deliver, webhook_policy
from researchcrew.net.address_policy import AddressPolicy, Resolver
from researchcrew.runtime import open_runtime
from researchcrew.settings import JobsSettings, Settings, WebhooksSettings
from researchcrew.testing import FakeTool, fake_chunk
from tests.loopback.server import LoopbackServer, Reply, closed_port

OK = Reply.json({"ok": True})


def _settings(tmp_path: Path, allow: Sequence[str] = ()) -> Settings:
    jobs = JobsSettings(retry_backoff_s=0.01, retry_backoff_max_s=0.05, webhook_attempts=2, webhook_timeout_s=2)
    return Settings(data_dir=tmp_path / "data", jobs=jobs, webhooks=WebhooksSettings(allow=list(allow)))


def _tool() -> FakeTool:
    return FakeTool("rag", chunks=[fake_chunk("rag", 1, content="Flaky tests fail at random.", semantic_relevance=0.9)])


@asynccontextmanager
async def _finished_run(settings: Settings) -> AsyncIterator[tuple[JobStore, RunInfo]]:
    """A finished run (of a job without a webhook) to deliver by hand, and its store."""
    async with open_runtime(settings, tools=[_tool()], remember=False) as runtime:
        jobs = Jobs(runtime)
        await jobs.create("ada", name="plain", questions=["What is a flaky test?"])
        yield await jobs.store(), await jobs.run("ada", "plain")


def _loopback_spellings(port: int) -> list[str]:
    return [
        f"http://127.0.0.1:{port}/hook",
        f"http://127.1:{port}/hook",
        f"http://127.0.1:{port}/hook",
        f"http://2130706433:{port}/hook",
        f"http://0x7f000001:{port}/hook",
        f"http://017700000001:{port}/hook",
        f"http://0x7f.1:{port}/hook",
        f"http://localhost:{port}/hook",
    ]


async def _deliver(store: JobStore, run: RunInfo, url: str, settings: Settings, policy: AddressPolicy) -> RunInfo:
    await deliver(run, url=url, secret="s3cret-s3cret", store=store, settings=settings.jobs, policy=policy)
    return await store.get_run(run.id)


async def test_by_default_nothing_reaches_a_loopback_listener(tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    with LoopbackServer(lambda request: OK) as server:
        urls = [
            *_loopback_spellings(server.port),
            f"http://LOCALHOST.:{server.port}/hook",
            f"http://[::ffff:127.0.0.1]:{server.port}/hook",
            f"http://user@127.0.0.1:{server.port}/hook",
        ]
        async with _finished_run(settings) as (store, run):
            for url in urls:
                delivered = await _deliver(store, run, url, settings, webhook_policy(settings))
                assert (delivered.webhook_state, delivered.webhook_error) == ("failed", REFUSED), url
        assert server.requests == []


async def test_allowed_by_the_setting_every_spelling_reaches_it(tmp_path: Path) -> None:
    settings = _settings(tmp_path, allow=["127.0.0.0/8", "::1", "localhost"])
    with LoopbackServer(lambda request: OK) as server:
        urls = _loopback_spellings(server.port)
        async with _finished_run(settings) as (store, run):
            for url in urls:
                delivered = await _deliver(store, run, url, settings, webhook_policy(settings))
                assert (delivered.webhook_state, delivered.webhook_error) == ("delivered", None), url
        assert len(server.requests_to("/hook")) == len(urls)
        assert {request.headers["host"] for request in server.requests} >= {
            f"127.0.0.1:{server.port}",
            f"localhost:{server.port}",
        }


async def test_a_job_stored_before_the_policy_is_refused_at_delivery(tmp_path: Path) -> None:
    """Creation refuses a loopback webhook now, but a job stored earlier (or a row written by hand) still has one:
    the run finishes, its webhook is refused by policy, and the listener hears nothing."""
    with LoopbackServer(lambda request: OK) as server:
        async with open_runtime(_settings(tmp_path), tools=[_tool()], remember=False) as runtime:
            jobs = Jobs(runtime)
            spec = JobSpec(
                name="legacy",
                questions=[JobQuestion(question="What is a flaky test?")],
                webhook_url=f"{server.url}/hook",  # pydantic parses the URL
            )
            await (await jobs.store()).create_job("ada", spec)
            run = await jobs.status("ada", (await jobs.run("ada", "legacy")).id)
    assert (run.status, run.webhook_state, run.webhook_error) == ("completed", "failed", REFUSED)
    assert server.requests == []


def _resolver(answers: dict[str, list[str]]) -> Resolver:
    async def resolve(host: str, port: int) -> Sequence[str]:
        if host not in answers:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return answers[host]

    return resolve


async def test_the_post_goes_to_the_vetted_address_with_the_names_host_header(tmp_path: Path) -> None:
    """``hooks.example.test`` exists only in this resolver: had the HTTP client looked the name up again (the
    window DNS rebinding uses), it would not have connected at all."""
    settings = _settings(tmp_path)
    with LoopbackServer(lambda request: OK) as server:
        resolver = _resolver({"hooks.example.test": ["127.0.0.1"], "rebound.example.test": ["127.0.0.1"]})
        allowed = AddressPolicy(["hooks.example.test"], resolver=resolver)
        public_only = AddressPolicy(resolver=resolver)
        async with _finished_run(settings) as (store, run):
            pinned = await _deliver(store, run, f"http://hooks.example.test:{server.port}/pinned", settings, allowed)
            assert (pinned.webhook_state, pinned.webhook_error) == ("delivered", None)
            url = f"http://rebound.example.test:{server.port}/rebound"
            rebound = await _deliver(store, run, url, settings, public_only)
            assert (rebound.webhook_state, rebound.webhook_error) == ("failed", REFUSED)
    [request] = server.requests
    assert request.path == "/pinned" and request.headers["host"] == f"hooks.example.test:{server.port}"


@pytest.mark.parametrize("failure", ["closed port", "dropped connection", "no such name"])
async def test_every_failure_to_deliver_reads_the_same(tmp_path: Path, failure: str) -> None:
    settings = _settings(tmp_path, allow=["127.0.0.1"])
    policy = AddressPolicy(["127.0.0.1"], resolver=_resolver({}))
    with LoopbackServer(lambda request: Reply(drop_connection=True)) as server:
        url = {
            "closed port": f"http://127.0.0.1:{closed_port()}/hook",
            "dropped connection": f"{server.url}/hook",
            "no such name": "http://no-such-host.example.test/hook",
        }[failure]
        async with _finished_run(settings) as (store, run):
            delivered = await _deliver(store, run, url, settings, policy)
    assert (delivered.webhook_state, delivered.webhook_error) == ("failed", FAILED)


@pytest.mark.parametrize("allow", [[], ["127.0.0.1"]])
async def test_a_worker_delivers_under_the_same_policy(tmp_path: Path, allow: list[str]) -> None:
    """The Redis worker's ``deliver_webhook`` task (called here with its worker resources, no Redis needed) reads
    the policy from the same settings as the in-process path."""
    from types import SimpleNamespace

    from researchcrew.jobs.queue import STATE_KEY, WorkerResources, deliver_webhook

    settings = _settings(tmp_path, allow=allow)
    with LoopbackServer(lambda request: OK) as server:
        async with open_runtime(settings, tools=[_tool()], remember=False) as runtime:
            jobs = Jobs(runtime)
            store = await jobs.store()
            spec = JobSpec(
                name="queued",
                questions=[JobQuestion(question="What is a flaky test?")],
                webhook_url=f"{server.url}/hook",  # pydantic parses the URL
            )
            await store.create_job("ada", spec)
            run = await jobs.run("ada", "queued")  # delivered (or refused) in process; the worker sends it again
            await store.set_webhook_state(run.id, "pending", 0, None)
            resources = WorkerResources(settings, runtime, store, await jobs.executor())
            context = SimpleNamespace(state=SimpleNamespace(**{STATE_KEY: resources}))
            delivered = await deliver_webhook(run.id, context=context)  # type: ignore[arg-type]
            after = await store.get_run(run.id)
    assert delivered is bool(allow)
    assert after.webhook_error == (None if allow else REFUSED)
    assert len(server.requests) == (2 if allow else 0)


def _certificates(tmp_path: Path, name: str) -> tuple[Path, Path, Path]:
    """A throwaway CA and a server certificate for ``name`` signed by it: (ca.pem, cert.pem, key.pem)."""
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.UTC)

    def certificate(subject: str, key: ec.EllipticCurvePrivateKey, issuer: x509.Name, signer: Any, ca: bool) -> Any:
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
            .issuer_name(issuer)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(hours=1))
            .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        )
        if not ca:
            builder = builder.add_extension(x509.SubjectAlternativeName([x509.DNSName(subject)]), critical=False)
        return builder.sign(signer, hashes.SHA256())

    ca_key, leaf_key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "test CA")])
    ca_cert = certificate("test CA", ca_key, ca_name, ca_key, ca=True)
    leaf = certificate(name, leaf_key, ca_name, ca_key, ca=False)
    paths = tmp_path / "ca.pem", tmp_path / "cert.pem", tmp_path / "key.pem"
    paths[0].write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(leaf.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(
        leaf_key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return paths


@pytest.mark.parametrize("certified", ["hooks.example.test", "other.example.test"])
async def test_https_to_a_pinned_address_checks_the_certificate_against_the_name(
    tmp_path: Path, certified: str
) -> None:
    """The connection goes to the vetted IP, but TLS is the name's: SNI says the name and the certificate must be
    the name's (a certificate for another name fails, as it would without pinning)."""
    import ssl
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    import httpx

    ca, cert, key = _certificates(tmp_path, certified)
    seen: dict[str, Any] = {}

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            seen["host"] = self.headers["Host"]
            self.send_response(204)
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            return

    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_context.load_cert_chain(cert, key)

    def remember_sni(sock: ssl.SSLObject, name: str | None, context: ssl.SSLContext) -> None:
        seen["sni"] = name

    server_context.sni_callback = remember_sni
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.socket = server_context.wrap_socket(httpd.socket, server_side=True)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        settings = _settings(tmp_path)
        port = httpd.server_address[1]
        policy = AddressPolicy(["hooks.example.test"], resolver=_resolver({"hooks.example.test": ["127.0.0.1"]}))
        transport = httpx.AsyncHTTPTransport(verify=ssl.create_default_context(cafile=str(ca)))
        async with _finished_run(settings) as (store, run):
            url = f"https://hooks.example.test:{port}/tls"
            await deliver(run, url=url, secret="s3cret-s3cret", store=store, settings=settings.jobs, policy=policy,
                          transport=transport)  # fmt: skip
            after = await store.get_run(run.id)
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)
    assert seen.get("sni") == "hooks.example.test"
    if certified == "hooks.example.test":
        assert (after.webhook_state, after.webhook_error) == ("delivered", None)
        assert seen["host"] == f"hooks.example.test:{port}"
    else:
        assert (after.webhook_state, after.webhook_error) == ("failed", FAILED)
