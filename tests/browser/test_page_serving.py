"""How the page and its files are served (no browser needed): from the package, with a Content-Security-Policy that
allows no inline code and nothing from elsewhere; the vendored library with its license."""

from __future__ import annotations

import re
from pathlib import Path

from researchcrew.service._web import STATIC_DIR
from tests.openai_compat.support import running_service, service_settings


async def test_the_page_and_its_files_are_served_with_security_headers(tmp_path: Path) -> None:
    async with running_service(service_settings(tmp_path)) as service, service.http() as http:
        page = await http.get("/")
        script = await http.get("/static/app.js")
        library = await http.get("/static/vendor/markdown-it.min.js")
        missing = await http.get("/static/nothing.js")
        outside = await http.get("/static/../web.py")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    policy = page.headers["content-security-policy"]
    assert "script-src 'self'" in policy and "default-src 'none'" in policy and "'unsafe-inline'" not in policy
    assert page.headers["x-content-type-options"] == "nosniff"
    assert page.headers["referrer-policy"] == "no-referrer"
    assert script.status_code == 200 and "javascript" in script.headers["content-type"]
    assert script.headers["x-content-type-options"] == "nosniff"
    assert library.status_code == 200 and "markdownit" in library.text
    assert missing.status_code == 404 and outside.status_code == 404


def test_the_page_has_no_inline_code_and_loads_nothing_from_elsewhere() -> None:
    html = (STATIC_DIR / "index.html").read_text()
    assert not re.search(r"<script(?![^>]*\bsrc=)", html), "inline scripts would be refused by the policy"
    assert not re.search(r"\son[a-z]+=", html), "inline event handlers would be refused by the policy"
    assert "<style" not in html and "style=" not in html
    assert not re.search(r"(src|href)=\"(https?:)?//", html), "everything comes from the service itself"


def test_the_vendored_library_keeps_its_license() -> None:
    license_text = (STATIC_DIR / "vendor" / "markdown-it.LICENSE").read_text()
    assert "markdown-it 15.0.3" in license_text and "Permission is hereby granted" in license_text
    assert "sourceMappingURL" not in (STATIC_DIR / "vendor" / "markdown-it.min.js").read_text()
