"""The web page in a real browser (Playwright driving Debian's Chromium): a person enters a key, asks a question
about the demo corpus, watches each source answer or fail, reads the cited answer, opens a citation's passage, and
sees the failure reasons. A source whose text is hostile (markup, a script, a tracking image) shows as text.

Chromium is /usr/bin/chromium (``apt-get install chromium``; ``scripts/setup.sh`` installs it). Without it the test
skips with the reason, and fails under CI. Every run saves a screenshot in the test's tmp dir; with
``UPDATE_SCREENSHOTS=1`` it also refreshes ``docs/screenshots/web.png`` (the README's picture).
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from researchcrew.knowledge.collection import KnowledgeBase
from researchcrew.knowledge.documents import Document
from researchcrew.runtime import Runtime, open_runtime
from researchcrew.service._app import create_app
from researchcrew.service.accounts import Accounts
from researchcrew.settings import ArxivSettings, RetrievalSettings, ServiceSettings
from tests.conftest import PROJECT_ROOT
from tests.e2e.support import demo_documents, offline_settings, shared_embedder
from tests.helpers.services import service_unavailable
from tests.loopback.server import LoopbackServer, Reply, Request
from tests.service.support import LiveServer, live_server

pytestmark = pytest.mark.slow

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
SCREENSHOT = PROJECT_ROOT / "docs" / "screenshots" / "web.png"
QUESTION = "What is metamorphic testing?"
HOSTILE = Document(
    source_key="hostile#1",
    title='Metamorphic testing <img src=x onerror="window.__pwned=1"> notes',
    url="javascript:window.__pwned=2",
    text=(
        "Metamorphic testing is a way to test programs without an oracle <script>window.__pwned=3</script> by "
        "checking relations between outputs. ![tracker](http://127.0.0.1:9/pixel.png) "
        "[click me](javascript:window.__pwned=4)"
    ),
)


@dataclass
class Page:
    url: str
    key: str
    server: LiveServer
    runtime: Runtime


def arxiv_down(request: Request) -> Reply:
    """arXiv answering 503 after six seconds: a failure with a reason, late enough to watch the others live."""
    return Reply.text("Service Unavailable", status=503, delay_s=6)


@pytest.fixture
def chromium_path() -> Path:
    try:
        import playwright  # noqa: F401
    except ImportError:
        service_unavailable("the playwright package is not installed (pip install playwright; it is a dev dependency)")
    if not CHROMIUM.exists():
        service_unavailable(f"{CHROMIUM} is missing (apt-get install chromium; scripts/setup.sh installs it)")
    return CHROMIUM


@contextmanager
def serving(data_dir: Path, documents: list[Document], *, auth: bool = True) -> Iterator[Page]:
    """The service over a knowledge base of ``documents``, the web search unconfigured and arXiv failing, served
    by uvicorn on a loopback port; a key for ada (or no keys at all: ``auth=False``, as `serve --no-auth`)."""
    with LoopbackServer(arxiv_down) as arxiv:
        settings = offline_settings(
            data_dir,
            arxiv=ArxivSettings(api_url=f"{arxiv.url}/api/query", min_interval_s=0, num_retries=0, timeout_s=10),
            retrieval=RetrievalSettings(timeout_per_source_s=10),
            service=ServiceSettings(auth=auth),
        )
        knowledge_base = KnowledgeBase(settings, embedder=shared_embedder())
        knowledge_base.add_documents(documents)
        runtime = open_runtime(settings, knowledge_base=knowledge_base)
        try:
            with live_server(create_app(settings, runtime=runtime)) as server:
                issued = server.run_in_loop(_add_user(runtime, "ada"))
                yield Page(url=server.url, key=issued, server=server, runtime=runtime)
                server.run_in_loop(runtime.aclose())
        finally:
            knowledge_base.close()


@pytest.fixture
def served_page(tmp_path: Path) -> Iterator[Page]:
    """Demo-corpus abstracts about metamorphic and flaky tests."""
    with serving(tmp_path, demo_documents(("Metamorphic", "Flaky"))) as page:
        yield page


@pytest.fixture
def hostile_page(tmp_path: Path) -> Iterator[Page]:
    """The same, with one document whose title, link and text attack the page."""
    with serving(tmp_path, [*demo_documents(("Metamorphic",)), HOSTILE]) as page:
        yield page


async def _add_user(runtime: Runtime, name: str) -> str:
    return (await Accounts(await runtime.memory_store()).add_user(name)).key


def test_a_researcher_asks_watches_the_sources_and_opens_a_citation(
    served_page: Page, chromium_path: Path, tmp_path: Path
) -> None:
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(chromium_path), args=CHROMIUM_FLAGS)
        try:
            page = browser.new_page(viewport={"width": 1440, "height": 1040})
            blocked: list[str] = []
            page.on("request", lambda request: _outside(request.url, served_page.url, blocked))
            errors: list[str] = []
            page.on("pageerror", lambda error: errors.append(str(error)))
            page.goto(served_page.url)

            # A wrong key is refused in words; the right one opens the app.
            expect(page.get_by_role("heading", name="Sign in with your API key")).to_be_visible()
            page.get_by_label("API key").fill("rc_000000000000_" + "x" * 43)
            page.get_by_role("button", name="Use key").click()
            expect(page.locator("#key-error")).to_contain_text("not valid")
            page.get_by_label("API key").fill(served_page.key)
            page.get_by_label("API key").press("Enter")
            expect(page.locator("#key-badge")).to_contain_text("key rc_")
            expect(page.locator("#sessions-state")).to_contain_text("No sessions yet")
            # The page lists the sources it will watch once /readyz has answered (under load, after the sign-in):
            # a question asked before that shows each source only when it reports, never as pending.
            expect(page.locator('#source-toggles input[value="arxiv"]')).to_be_checked()

            # Ask with the keyboard; watch the sources answer while the answer is still being researched.
            page.get_by_label("Your question").fill(QUESTION)
            page.get_by_label("Your question").press("Enter")
            expect(page.get_by_role("button", name="Researching…")).to_be_disabled()
            # The web search fails at once (not configured) while arXiv still waits on its slow 503: live updates.
            expect(page.locator('li[data-source="web"]')).to_have_attribute("data-state", "failed")
            expect(page.locator('li[data-source="arxiv"]')).to_have_attribute("data-state", "pending")
            expect(page.locator(".answer:not(.draft)")).to_have_count(0)
            rag = page.locator('li[data-source="rag"]')
            page.screenshot(path=str(tmp_path / "web-live.png"))

            answer = page.locator(".answer:not(.draft)")
            expect(answer).to_contain_text("etamorphic testing", timeout=30_000)
            expect(rag).to_have_attribute("data-state", "success")
            expect(page.get_by_role("button", name="Ask")).to_be_enabled()

            # Every source with its state; failures with their reason.
            expect(rag.locator(".detail")).to_contain_text("passage")
            web = page.locator('li[data-source="web"]')
            expect(web).to_have_attribute("data-state", "failed")
            expect(web.locator(".detail")).to_contain_text("not configured")
            arxiv = page.locator('li[data-source="arxiv"]')
            expect(arxiv).to_have_attribute("data-state", "failed")
            expect(arxiv.locator(".detail")).to_contain_text("503")
            expect(page.locator(".badge").first).to_contain_text("Extractive")

            # Numbered citations open the passage and its link.
            markers = answer.locator("button.cite")
            assert markers.count() >= 1
            markers.first.click()
            passage = page.locator("#passage")
            expect(passage).to_be_visible()
            expect(page.locator("#passage-number")).to_have_text(markers.first.inner_text())
            expect(page.locator("#passage-text")).not_to_be_empty()
            cited_title = page.locator("#passage-title").inner_text()
            assert cited_title, "the passage panel names its source"
            link = page.locator("#passage-link")
            expect(link).to_be_visible()  # a demo-corpus abstract: its passage and its arXiv page
            assert re.match(r"^https?://arxiv\.org/abs/", link.get_attribute("href") or "")
            assert link.get_attribute("rel") == "noopener noreferrer nofollow"
            assert link.get_attribute("target") == "_blank"
            page.locator(".exchange").first.evaluate("n => { n.scrollIntoView(); n.parentElement.scrollTop -= 24; }")
            page.screenshot(path=str(tmp_path / "web.png"))

            assert not blocked, f"the page fetched outside the service: {blocked}"
            assert not errors, errors

            # The session is listed, and survives a reload (the key is remembered).
            session = page.locator(".sessions li").first
            expect(session).to_contain_text(QUESTION)
            expect(session).to_contain_text("1 answer")
            page.reload()
            expect(page.locator(".answer:not(.draft)")).to_contain_text("etamorphic testing")
            expect(page.locator('li[data-source="web"]')).to_have_attribute("data-state", "failed")

            # Forgetting the key signs out.
            page.get_by_role("button", name="Forget key").click()
            expect(page.get_by_role("heading", name="Sign in with your API key")).to_be_visible()
            assert page.evaluate("localStorage.getItem('researchcrew.apiKey')") is None
        finally:
            browser.close()

    if os.environ.get("UPDATE_SCREENSHOTS") == "1":
        SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(tmp_path / "web.png", SCREENSHOT)


@pytest.fixture
def keyless_page(tmp_path: Path) -> Iterator[Page]:
    """The service with authentication off (`serve --no-auth`)."""
    with serving(tmp_path, demo_documents(("Metamorphic",)), auth=False) as page:
        yield page


def test_without_authentication_the_page_needs_no_key(keyless_page: Page, chromium_path: Path) -> None:
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(chromium_path), args=CHROMIUM_FLAGS)
        try:
            page = browser.new_page()
            page.goto(keyless_page.url)
            expect(page.locator("#key-badge")).to_have_text("local mode: no key needed")
            expect(page.get_by_role("button", name="Forget key")).to_be_hidden()
            expect(page.locator("#key-panel")).to_be_hidden()
            page.get_by_role("button", name="+ New session").click()
            expect(page.locator(".sessions li")).to_have_count(1)
            page.get_by_label("Style").select_option("concise")
            page.get_by_label("Web").uncheck()  # this question only: the web is not searched
            page.get_by_label("Your question").fill(QUESTION)
            page.get_by_role("button", name="Ask").click()
            expect(page.locator(".answer:not(.draft)")).to_contain_text("etamorphic", timeout=30_000)
            expect(page.locator('li[data-source="web"]')).to_have_attribute("data-state", "skipped")
            page.on("dialog", lambda dialog: dialog.accept())
            page.locator(".sessions li").first.hover()
            page.get_by_role("button", name=re.compile("^Delete the session")).click()
            expect(page.locator("#sessions-state")).to_contain_text("No sessions yet")
            expect(page.locator(".exchange")).to_have_count(0)
        finally:
            browser.close()


def test_text_from_a_hostile_source_stays_text(hostile_page: Page, chromium_path: Path) -> None:
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(chromium_path), args=CHROMIUM_FLAGS)
        try:
            page = browser.new_page()
            fetched: list[str] = []
            page.on("request", lambda request: _outside(request.url, hostile_page.url, fetched))
            page.goto(hostile_page.url)
            page.evaluate(f"localStorage.setItem('researchcrew.apiKey', {hostile_page.key!r})")
            page.reload()
            page.get_by_label("Your question").fill("How is software tested without an oracle?")
            page.get_by_label("Your question").press("Enter")
            hostile = page.locator(".citation", has_text="onerror")
            expect(hostile).to_have_count(1, timeout=30_000)
            hostile.click()
            expect(page.locator("#passage-title")).to_have_text(HOSTILE.title or "")
            expect(page.locator("#passage-text")).to_contain_text("<script>window.__pwned=3</script>")
            expect(page.locator("#passage-link")).to_be_hidden()  # a javascript: URL is never a link
            expect(page.locator("#passage-nolink")).to_be_visible()
            assert page.evaluate("window.__pwned") is None
            assert page.locator(".answer img, .answer script, #passage img, .answer a[href^='javascript']").count() == 0
            assert not fetched, f"the page fetched outside the service: {fetched}"
        finally:
            browser.close()


def test_errors_are_shown_in_words(served_page: Page, chromium_path: Path) -> None:
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(chromium_path), args=CHROMIUM_FLAGS)
        try:
            page = browser.new_page()
            page.goto(served_page.url)
            page.evaluate(f"localStorage.setItem('researchcrew.apiKey', {served_page.key!r})")
            page.reload()
            expect(page.locator("#key-badge")).to_contain_text("key rc_")

            # The service stops answering questions: the page says so instead of spinning forever.
            def unreachable(route: Any) -> None:
                route.abort("connectionrefused")

            page.route("**/v1/sessions/*/messages", unreachable)
            page.get_by_label("Your question").fill(QUESTION)
            page.get_by_role("button", name="Ask").click()
            expect(page.locator(".failure")).to_contain_text("Cannot reach the researchcrew service")
            expect(page.get_by_role("button", name="Ask")).to_be_enabled()
            page.unroute("**/v1/sessions/*/messages")

            # A key revoked meanwhile: the page asks for a key again, with the service's reason.
            served_page.server.run_in_loop(_revoke(served_page.runtime, "ada"))
            page.get_by_label("Your question").fill(QUESTION)
            page.get_by_label("Your question").press("Enter")
            expect(page.locator("#key-error")).to_contain_text("not valid")
        finally:
            browser.close()


async def _revoke(runtime: Runtime, name: str) -> None:
    await Accounts(await runtime.memory_store()).revoke(name)
    await asyncio.sleep(0)


def _outside(url: str, base: str, blocked: list[str]) -> None:
    if not (url.startswith(base) or url.startswith("data:")):
        blocked.append(url)
