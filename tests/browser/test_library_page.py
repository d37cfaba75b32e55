"""The Library on the web page, in a real browser (Playwright driving Debian's Chromium, the harness of
``test_web_page``): a person opens the Library, uploads a Markdown file and a PDF (upload progress, then each file's
status until it is ready), sees a corrupt file refused with the loader's reason, asks a question that the uploaded
file answers and reads a citation naming the file and its section, unticks "My documents" among the collections to
search and sees the file left out, then deletes the file. Another user's Library
stays empty. Every run saves a screenshot in the test's tmp dir."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from researchcrew.runtime import open_runtime
from researchcrew.service._app import create_app
from tests.browser.test_web_page import CHROMIUM_FLAGS, Page, _add_user, _outside, chromium_path  # noqa: F401
from tests.ingestion.files import write_pdf
from tests.service.support import live_server
from tests.service.test_documents_http import NOTES, settings_for

pytestmark = pytest.mark.slow


@dataclass
class LibraryPage(Page):
    bob: str = ""  # a second user's key


@pytest.fixture
def library_page(tmp_path: Path) -> Iterator[LibraryPage]:
    """The service over an empty knowledge base (RAG the only source), on a loopback port; keys for ada and bob."""
    settings = settings_for(tmp_path / "data")
    runtime = open_runtime(settings, remember=False)
    with live_server(create_app(settings, runtime=runtime)) as server:
        ada, bob = (server.run_in_loop(_add_user(runtime, name)) for name in ("ada", "bob"))
        yield LibraryPage(url=server.url, key=ada, server=server, runtime=runtime, bob=bob)
        server.run_in_loop(runtime.aclose())


def test_a_researcher_uploads_watches_asks_and_deletes(
    library_page: LibraryPage,
    chromium_path: Path,  # noqa: F811 - the fixture imported from test_web_page
    tmp_path: Path,
) -> None:
    from playwright.sync_api import expect, sync_playwright

    notes = tmp_path / "lab-notes.md"
    notes.write_text(NOTES)
    survey = write_pdf(tmp_path / "survey.pdf", ["Introduction.", "Methods: flaky tests are rerun three times."])
    broken = tmp_path / "broken.pdf"
    broken.write_bytes(b"%PDF-1.4\nnot really a pdf\n%%EOF")

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(chromium_path), args=CHROMIUM_FLAGS)
        try:
            page = browser.new_page(viewport={"width": 1440, "height": 1000})
            outside: list[str] = []
            page.on("request", lambda request: _outside(request.url, library_page.url, outside))
            errors: list[str] = []
            page.on("pageerror", lambda error: errors.append(str(error)))
            page.on("dialog", lambda dialog: dialog.accept())
            page.goto(library_page.url)
            page.evaluate(f"localStorage.setItem('researchcrew.apiKey', {library_page.key!r})")
            page.reload()
            expect(page.locator("#key-badge")).to_contain_text("key rc_")

            page.get_by_role("button", name="Library").click()
            expect(page.get_by_role("heading", name="Library")).to_be_visible()
            expect(page.locator("#documents-state")).to_contain_text("No documents yet")
            expect(page.get_by_label("Your question")).to_be_hidden()

            # A corrupt file is refused with the loader's reason, and nothing is listed.
            page.get_by_label("Add documents").set_input_files([str(broken)])
            page.get_by_role("button", name="Upload").click()
            expect(page.locator("#upload-message")).to_contain_text("broken.pdf")
            expect(page.locator("#documents li")).to_have_count(0)

            # Two good files: uploaded, then each ready with its passages.
            page.get_by_label("Add documents").set_input_files([str(notes), str(survey)])
            page.get_by_role("button", name="Upload").click()
            expect(page.locator("#upload-message")).to_contain_text("Uploaded: lab-notes.md, survey.pdf")
            items = page.locator("#documents li")
            expect(items).to_have_count(2)
            expect(page.locator('#documents li[data-status="ready"]')).to_have_count(2, timeout=60_000)
            expect(items.filter(has_text="survey.pdf").locator(".document-status")).to_contain_text("Ready ·")
            page.screenshot(path=str(tmp_path / "library.png"))

            # A question the uploaded notes answer: the citation names the file and its section.
            page.get_by_role("button", name="Back to questions").click()
            expect(page.locator("#library")).to_be_hidden()
            page.get_by_label("Your question").fill("What does the zorblax scheduler do?")
            page.get_by_label("Your question").press("Enter")
            answer = page.locator(".answer:not(.draft)")
            expect(answer).to_contain_text("zorblax", timeout=60_000)
            citations = page.locator(".citation")
            expect(citations.filter(has_text="lab-notes.md").first).to_contain_text("§ Flaky tests")
            answer.locator("button.cite").first.click()
            expect(page.locator("#passage-meta")).to_contain_text(".md")
            page.keyboard.press("Escape")

            # The composer's Collections toggles: "My documents" unticked, the uploads are left out of the search.
            toggles = page.locator("#collection-toggles")
            expect(toggles).to_be_visible()
            toggles.get_by_label("My documents").uncheck()
            page.get_by_label("Your question").fill("What does the zorblax scheduler do?")
            page.get_by_label("Your question").press("Enter")
            second = page.locator(".exchange").nth(1)
            expect(second.locator(".badges")).to_be_visible(timeout=60_000)
            expect(second.locator(".citation").filter(has_text="lab-notes.md")).to_have_count(0)
            expect(second.locator(".answer")).to_contain_text("could not find")  # only the notes know
            toggles.get_by_label("My documents").check()

            # Delete one: gone from the list.
            page.get_by_role("button", name="Library").click()
            page.get_by_role("button", name="Delete lab-notes.md").click()
            expect(items).to_have_count(1)
            expect(items.first).to_contain_text("survey.pdf")

            # Another user's Library is empty.
            page.evaluate(f"localStorage.setItem('researchcrew.apiKey', {library_page.bob!r})")
            page.reload()
            page.get_by_role("button", name="Library").click()
            expect(page.locator("#documents-state")).to_contain_text("No documents yet")

            assert not outside, f"the page fetched outside the service: {outside}"
            assert not errors, errors
        finally:
            browser.close()
