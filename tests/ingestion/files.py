"""Small real files of every format the loaders read, written into a test's tmp_path."""

from __future__ import annotations

import json
from pathlib import Path


def write_pdf(
    path: Path, pages: list[str], *, title: str | None = None, author: str | None = None, created: str | None = None
) -> Path:
    """A minimal but valid PDF (xref offsets computed), one line of Helvetica text per page entry.

    Each page's text is drawn line by line (split on "\\n"), so extraction sees real line breaks.
    """
    objects: list[bytes] = []
    page_ids = [4 + 2 * index for index in range(len(pages))]
    info_id = 4 + 2 * len(pages)
    objects.append(b"<< /Type /Catalog /Pages 2 0 R >>")
    kids = " ".join(f"{page_id} 0 R" for page_id in page_ids)
    objects.append(f"<< /Type /Pages /Kids [{kids}] /Count {len(pages)} >>".encode())
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    for page_id, text in zip(page_ids, pages, strict=True):
        lines = []
        for number, line in enumerate(text.split("\n")):
            escaped = line.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
            lines.append(f"BT /F1 11 Tf 50 {750 - 16 * number} Td ({escaped}) Tj ET")
        stream = "\n".join(lines).encode("latin-1")
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> "
            f"/Contents {page_id + 1} 0 R >>".encode()
        )
        objects.append(b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream")
    info = []
    for key, value in (("Title", title), ("Author", author), ("CreationDate", created)):
        if value is not None:
            info.append(f"/{key} ({value})")
    objects.append(f"<< {' '.join(info)} >>".encode())
    assert len(objects) == info_id
    out = bytearray(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n".encode() + body + b"\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += b"".join(f"{offset:010d} 00000 n \n".encode() for offset in offsets)
    trailer = f"<< /Size {len(objects) + 1} /Root 1 0 R /Info {info_id} 0 R >>"
    out += f"trailer\n{trailer}\nstartxref\n{xref}\n%%EOF\n".encode()
    path.write_bytes(bytes(out))
    return path


HTML_PAGE = """<!doctype html>
<html lang="en"><head>
<title>Coral bleaching | Ocean Lab</title>
<meta name="author" content="Ada Lovelace">
<meta property="article:published_time" content="2021-06-03T10:00:00Z">
<script>var tracker = "SCRIPTTEXT_MUST_NOT_APPEAR";</script>
<style>body { color: black; }</style>
</head><body>
<header><div class="logo">Ocean Lab</div>
<nav><ul><li><a href="/">Home</a></li><li><a href="/about">NAVLINK About us</a></li>
<li><a href="/contact">NAVLINK Contact</a></li></ul></nav></header>
<main><article>
<h1>Coral bleaching in warm summers</h1>
<p>Corals expel the symbiotic algae living in their tissue when the water stays too warm for weeks,
which turns them completely white and often kills them.</p>
<h2>Methods</h2>
<p>We surveyed forty reefs over two summers and counted bleached colonies along fixed transects.</p>
<h3>Statistics</h3>
<p>Counts were compared with a mixed model that had the reef as a random effect.</p>
</article></main>
<aside class="sidebar">ASIDE Related posts and a newsletter signup</aside>
<footer><p>FOOTERTEXT Copyright 2019 Ocean Lab. All rights reserved.</p></footer>
<script>console.log("SCRIPTTEXT_TWO");</script>
</body></html>
"""

MARKDOWN_NOTE = """---
title: Enzyme kinetics notes
date: 2023-05-17
authors: [Grace Hopper, Alan Turing]
tags: [biochemistry, enzymes]
---
# Michaelis-Menten

The rate of an enzyme reaction rises with substrate concentration and levels off at Vmax.

Km is the substrate concentration at half of Vmax.

Inhibitors
----------

Competitive inhibitors raise the apparent Km without changing Vmax.
"""


def write_beir(path: Path, records: list[dict[str, str]]) -> Path:
    path.write_text("".join(json.dumps(record) + "\n" for record in records), encoding="utf-8")
    return path


def beir_records() -> list[dict[str, str]]:
    return [
        {
            "_id": "101",
            "title": "Aspirin and heart attacks",
            "text": "Daily low-dose aspirin reduced the risk of a first heart attack in men over fifty.",
        },
        {
            "_id": "102",
            "title": "Sleep and memory",
            "text": "Slow-wave sleep after learning improved recall of word pairs the next morning.",
        },
        {
            "_id": "103",
            "title": "Exercise and depression",
            "text": "Aerobic exercise three times a week lowered depression scores as much as medication.",
        },
    ]
