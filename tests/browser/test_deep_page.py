"""Deep research on the web page, in a real browser (Playwright driving Debian's Chromium, the harness of
``test_web_page``): a person turns on "Deep research", asks, gets the plan as an editable list, rewords one
sub-question and removes another, approves, watches each sub-question being researched, and reads the report with
its citations and quality scores. Every run saves a screenshot in the test's tmp dir."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from researchcrew.runtime import open_runtime
from researchcrew.service._app import create_app
from researchcrew.settings import ServiceSettings, Settings
from tests.browser.test_web_page import CHROMIUM_FLAGS, Page, _add_user, _outside, chromium_path  # noqa: F401
from tests.deep.corpus import CorpusTool
from tests.deep.export_support import docx_text, markers, pdf_text
from tests.service.support import live_server

pytestmark = pytest.mark.slow

QUESTION = "What is known about pooled testing?"
REWORDED = "How does pooled testing save reagents?"


@pytest.fixture
def deep_page(tmp_path: Path) -> Iterator[Page]:
    """The service over the deep-run tests' in-process corpus, served by uvicorn on a loopback port; a key for ada."""
    settings = Settings(data_dir=tmp_path, service=ServiceSettings(auth=True))
    runtime = open_runtime(settings, tools=[CorpusTool()], remember=False)
    with live_server(create_app(settings, runtime=runtime)) as server:
        key = server.run_in_loop(_add_user(runtime, "ada"))
        yield Page(url=server.url, key=key, server=server, runtime=runtime)
        server.run_in_loop(runtime.aclose())


def test_a_researcher_edits_and_approves_a_plan_and_reads_the_report(
    deep_page: Page,
    chromium_path: Path,  # noqa: F811 - the fixture imported from test_web_page
    tmp_path: Path,
) -> None:
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(chromium_path), args=CHROMIUM_FLAGS)
        try:
            page = browser.new_page(viewport={"width": 1440, "height": 1100})
            outside: list[str] = []
            page.on("request", lambda request: _outside(request.url, deep_page.url, outside))
            errors: list[str] = []
            page.on("pageerror", lambda error: errors.append(str(error)))
            page.goto(deep_page.url)
            page.evaluate(f"localStorage.setItem('researchcrew.apiKey', {deep_page.key!r})")
            page.reload()
            expect(page.locator("#key-badge")).to_contain_text("key rc_")

            page.get_by_label("Deep research").check()
            page.get_by_label("Report type").select_option("literature_review")
            page.get_by_label("Your question").fill(QUESTION)
            page.get_by_label("Your question").press("Enter")

            # The run pauses at its plan: an editable list.
            items = page.locator(".deep-plan-item")
            expect(items.first).to_be_visible(timeout=30_000)
            proposed = items.count()
            assert proposed >= 3, proposed
            expect(page.get_by_role("button", name="Ask")).to_be_enabled()
            second = items.nth(1).locator("input").input_value()
            items.first.locator("input").fill(REWORDED)
            items.nth(1).get_by_role("button", name="Move up").click()  # the second item goes first
            items.last.get_by_role("button", name="Remove").click()
            expect(items).to_have_count(proposed - 1)
            page.screenshot(path=str(tmp_path / "deep-plan.png"))
            page.get_by_role("button", name="Approve plan").click()

            # Each sub-question's progress, then the report with sections, citations and quality scores.
            report = page.locator(".deep-report")
            expect(report).to_be_visible(timeout=60_000)
            subs = page.locator(".deep-sub")
            expect(subs).to_have_count(proposed - 1)
            expect(subs.first.locator(".name")).to_have_text(second)
            expect(subs.nth(1).locator(".name")).to_have_text(REWORDED)
            expect(report.locator(".answer")).to_contain_text(REWORDED)  # a section per sub-question
            expect(report.locator(".citation").first).to_be_visible()
            expect(report.locator('.deep-quality [data-score="overall"] .detail')).to_have_text(re.compile(r"^\d+%$"))
            report.locator("button.cite").first.click()
            expect(page.locator("#passage")).to_be_visible()
            expect(page.locator("#passage-text")).not_to_be_empty()
            themes = report.locator(".deep-themes li")
            expect(themes).to_have_count(proposed - 1)  # a literature review: each theme with its sources
            expect(themes.first.locator(".detail")).to_have_text(re.compile(r"^\[\d+\] "))
            page.screenshot(path=str(tmp_path / "deep-report.png"), full_page=True)

            # The report downloads as a file, in the format chosen (the key goes in a header, as for every call).
            page.keyboard.press("Escape")
            texts = {}
            for fmt in ("docx", "pdf", "md"):
                report.get_by_label("Report format").select_option(fmt)
                with page.expect_download() as download_info:
                    report.get_by_role("button", name="Download report").click()
                download = download_info.value
                assert re.fullmatch(
                    rf"report-what-is-known-about-pooled-testing-[a-z0-9]+\.{fmt}", download.suggested_filename
                )
                saved = tmp_path / download.suggested_filename
                download.save_as(saved)
                texts[fmt] = {"docx": docx_text, "pdf": pdf_text}.get(fmt, lambda c: c.decode())(saved.read_bytes())
                expect(report.locator(".deep-download [role=status]")).to_have_text(f"Downloaded {saved.name}")
            for fmt, text in texts.items():
                assert REWORDED in text and "Sources on this theme:" in text, fmt
                assert sorted(set(markers(text))) == sorted(set(markers(texts["md"]))), fmt
            assert markers(texts["md"])

            assert not outside, f"the page fetched outside the service: {outside}"
            assert not errors, errors
        finally:
            browser.close()


def test_a_comparison_shows_its_table(
    deep_page: Page,
    chromium_path: Path,  # noqa: F811 - the fixture imported from test_web_page
    tmp_path: Path,
) -> None:
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(chromium_path), args=CHROMIUM_FLAGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 1000})
            errors: list[str] = []
            page.on("pageerror", lambda error: errors.append(str(error)))
            page.goto(deep_page.url)
            page.evaluate(f"localStorage.setItem('researchcrew.apiKey', {deep_page.key!r})")
            page.reload()
            expect(page.get_by_label("Report type")).to_be_hidden()  # deep-research options only in deep mode
            page.get_by_label("Deep research").check()
            page.get_by_label("Report type").select_option("comparison")
            page.get_by_label("Report length").select_option("brief")
            page.get_by_label("Your question").fill("Adaptive pooling vs Dorfman screening?")
            page.get_by_label("Your question").press("Enter")
            items = page.locator(".deep-plan-item")
            expect(items.first).to_be_visible(timeout=30_000)
            expect(items).to_have_count(3)  # brief
            assert "Adaptive pooling" in items.first.locator("input").input_value()
            page.get_by_role("button", name="Approve plan").click()
            table = page.locator(".deep-report .deep-comparison")
            expect(table).to_be_visible(timeout=60_000)
            expect(table.locator("th")).to_have_text(["Aspect", "Adaptive pooling", "Dorfman screening"])
            expect(table.locator("tr")).to_have_count(4)
            page.screenshot(path=str(tmp_path / "deep-comparison.png"), full_page=True)
            assert not errors, errors
        finally:
            browser.close()
