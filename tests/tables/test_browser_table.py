"""The web page's answer table (issue 22 item 4), in a real browser (Playwright driving Debian's Chromium, the
harness of ``tests/browser``): a structured question's answer shows its rows as a sortable table (and not a second
time as Markdown), "Show all rows" reads the rest from the tables route, and "Download CSV" saves the whole table."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from researchcrew.runtime import open_runtime
from researchcrew.service._app import create_app
from researchcrew.settings import ServiceSettings
from tests.browser.test_web_page import CHROMIUM_FLAGS, Page, _add_user, _outside, chromium_path  # noqa: F401
from tests.deep.corpus import CorpusTool
from tests.e2e.support import offline_settings
from tests.service.support import live_server
from tests.tables.support import PANELS_QUESTION, FixedStage

pytestmark = pytest.mark.slow


@pytest.fixture
def table_page(tmp_path: Path) -> Iterator[Page]:
    settings = offline_settings(tmp_path / "data", service=ServiceSettings())
    runtime = open_runtime(settings, tools=[CorpusTool()], remember=False, structured=FixedStage())
    with live_server(create_app(settings, runtime=runtime)) as server:
        key = server.run_in_loop(_add_user(runtime, "ada"))
        yield Page(url=server.url, key=key, server=server, runtime=runtime)
        server.run_in_loop(runtime.aclose())


def test_a_structured_answer_is_a_sortable_table_with_a_csv_download(
    table_page: Page,
    chromium_path: Path,  # noqa: F811 - the fixture imported from test_web_page
    tmp_path: Path,
) -> None:
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(chromium_path), args=CHROMIUM_FLAGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 1000}, accept_downloads=True)
            outside: list[str] = []
            page.on("request", lambda request: _outside(request.url, table_page.url, outside))
            errors: list[str] = []
            page.on("pageerror", lambda error: errors.append(str(error)))
            page.goto(table_page.url)
            page.get_by_label("API key").fill(table_page.key)
            page.get_by_label("API key").press("Enter")
            page.get_by_label("Your question").fill(PANELS_QUESTION)
            page.get_by_label("Your question").press("Enter")

            block = page.locator(".answer-table")
            expect(block).to_be_visible(timeout=30_000)
            expect(page.locator(".answer.markdown table")).to_have_count(0)  # shown once, as the sortable table
            expect(page.locator(".answer.markdown")).to_contain_text("13 more rows")
            rows = block.locator("tbody tr")
            expect(rows).to_have_count(10)
            expect(rows.first.locator("td").first).to_have_text("SP-01")
            expect(block.locator(".answer-table-status")).to_have_text("10 of 23 rows shown.")

            width = block.get_by_role("button", name="Width (m)")
            width.click()
            width.click()  # descending
            expect(block.locator("th").nth(1)).to_have_attribute("aria-sort", "descending")
            expect(rows.first.locator("td").first).to_have_text("SP-10")

            block.get_by_role("button", name="Show all rows").click()
            expect(rows).to_have_count(23)
            expect(rows.first.locator("td").first).to_have_text("SP-23")  # still sorted by width, descending
            expect(block.locator(".answer-table-status")).to_have_text("23 rows.")
            page.screenshot(path=str(tmp_path / "answer-table.png"))

            with page.expect_download() as download_info:
                block.get_by_role("button", name="Download CSV").click()
            download = download_info.value
            saved = tmp_path / "download.csv"
            download.save_as(saved)
            assert download.suggested_filename.startswith("table-") and download.suggested_filename.endswith(".csv")
            lines = saved.read_text(encoding="utf-8").splitlines()
            assert len(lines) == 24 and lines[0] == '"Panel","Width (m)","document","location","citation"'
            assert not outside, outside
            assert not errors, errors
        finally:
            browser.close()
