"""PDF export with fpdf2 (pure Python): DejaVu Sans embedded as a Unicode TrueType font, so Latin, Greek, Cyrillic,
Hebrew and Arabic letters print; characters the font has no glyph for (most emoji) print as "?" rather than as
empty boxes. The font is Debian's ``fonts-dejavu-core`` (``/usr/share/fonts/truetype/dejavu``; the Dockerfile and
setup install it); without it the PDF falls back to the built-in Helvetica and Latin-1, saying so in the log.
Right-to-left lines are put in visual order with fpdf2's own (pure-Python) Unicode bidi algorithm; Arabic letters
keep their isolated forms (contextual shaping needs uharfbuzz, a compiled wheel).
Headings become PDF bookmarks; long reports open with a table of contents."""

from __future__ import annotations

import logging
import re
import unicodedata
from functools import cache
from pathlib import Path

from researchcrew.deep.export._document import ReportDocument, Section, Statement, marker

logger = logging.getLogger(__name__)

FONT_DIRS = (
    Path("/usr/share/fonts/truetype/dejavu"),
    Path("/usr/share/fonts/dejavu"),
    Path("/usr/share/fonts/TTF"),
    Path("/usr/local/share/fonts"),
    Path("/Library/Fonts"),
)
FAMILY = "DejaVuSans"
BREAK_AFTER = frozenset("/?&=-_")  # where a word longer than a line is best cut
LONG_WORD = 40  # in table cells (wrapped by fpdf2), longer words get break opportunities
_ZWSP = "\u200b"  # a zero-width space: fpdf2 breaks lines there
_SIZES = {1: 17.0, 2: 13.5, 3: 11.5}


@cache
def font_files() -> tuple[Path, Path] | None:
    """DejaVu Sans regular and bold, when this machine has them."""
    for directory in FONT_DIRS:
        regular, bold = directory / "DejaVuSans.ttf", directory / "DejaVuSans-Bold.ttf"
        if regular.is_file():
            return regular, bold if bold.is_file() else regular
    return None


@cache
def _glyphs(path: Path) -> frozenset[int]:
    from fontTools.ttLib import TTFont

    with TTFont(str(path), lazy=True) as font:
        return frozenset(font.getBestCmap())


class _Writer:
    def __init__(self) -> None:
        from fpdf import FPDF

        self.pdf = FPDF(format="A4")
        self.pdf.set_auto_page_break(auto=True, margin=16)
        self.pdf.set_margins(18, 16, 18)
        files = font_files()
        if files is None:
            logger.warning("DejaVu Sans not found in %s: the PDF uses Helvetica (Latin-1 only)", FONT_DIRS)
            self.family, self.glyphs = "helvetica", None
        else:
            self.pdf.add_font(FAMILY, "", str(files[0]))
            self.pdf.add_font(FAMILY, "B", str(files[1]))
            self.family, self.glyphs = FAMILY, _glyphs(files[0])
        self._widths: dict[tuple[str, str, float, str], float] = {}

    def text(self, value: str) -> str:
        if self.glyphs is None:
            return value.encode("latin-1", "replace").decode("latin-1")
        return "".join(char if ord(char) in self.glyphs or char in "\n\t" else "?" for char in value)

    def _width(self, char: str) -> float:
        key = (self.pdf.font_family, self.pdf.font_style, self.pdf.font_size_pt, char)
        width = self._widths.get(key)
        if width is None:
            width = self._widths[key] = self.pdf.get_string_width(char)
        return width

    def lines(self, text: str) -> list[str]:
        """``text`` wrapped to the page width, in one pass (fpdf2's own wrapping measures each line again for every
        character: quadratic, and minutes for a page of long URLs). Words longer than a line break after "/", "?",
        "&", "=", "-" or "_" when they can, else where the line is full."""
        room = self.pdf.epw - 1.0
        space = self._width(" ")
        lines: list[str] = []
        line, used = "", 0.0
        for word in text.split():
            widths = [self._width(char) for char in word]
            width = sum(widths)
            if line and used + space + width <= room:
                line, used = f"{line} {word}", used + space + width
                continue
            start = 0
            if line and width > room and room - used - space > room / 4:  # a long word starts on this line
                line, used = f"{line} ", used + space
            elif line:
                lines.append(line)
                line, used = "", 0.0
            while used + width > room:  # a word longer than the line's room: cut it
                cut, taken, soft = start, used, 0
                while cut < len(word) and taken + widths[cut] <= room:
                    taken += widths[cut]
                    cut += 1
                    if word[cut - 1] in BREAK_AFTER:
                        soft = cut
                cut = max(start + 1, soft if soft - start > (cut - start) // 2 else cut)
                lines.append(line + word[start:cut])
                width -= sum(widths[start:cut])
                start, line, used = cut, "", 0.0
            line, used = word[start:], width
        if line or not lines:
            lines.append(line)
        return lines

    def write(self, value: str, *, size: float = 10.5, bold: bool = False, after: float = 1.5) -> None:
        from fpdf.enums import XPos, YPos

        self.pdf.set_font(self.family, "B" if bold else "", size)
        text = self.text(value)
        rtl = any(unicodedata.bidirectional(char) in ("R", "AL") for char in text)
        base = None
        if rtl:  # right-to-left script: wrapped in logical order, each line then written in visual order
            from fpdf.bidi import auto_detect_base_direction

            base = auto_detect_base_direction(text)
        from fpdf.bidi import BidiParagraph
        from fpdf.enums import TextDirection

        align = "R" if base == TextDirection.RTL else "L"
        for line in self.lines(text):
            shown = line
            if base is not None and any(unicodedata.bidirectional(char) in ("R", "AL") for char in line):
                shown = BidiParagraph(text=line, base_direction=base).get_reordered_string()
            self.pdf.cell(0, size * 0.5, shown, align=align, new_x=XPos.LMARGIN, new_y=YPos.NEXT)
        self.pdf.ln(after)

    def heading(self, value: str, level: int) -> None:
        self.pdf.start_section(self.text(value)[:200], level=level - 1, strict=False)
        self.write(value, size=_SIZES.get(level, 11.0), bold=True, after=2.0)

    def table(self, section: Section) -> None:
        assert section.table is not None  # noqa: S101 - called for tables only
        from fpdf.enums import WrapMode

        self.pdf.set_font(self.family, "", 8.5)
        with self.pdf.table(wrapmode=WrapMode.WORD, line_height=4.2, first_row_as_headings=True) as table:
            table.row([breakable(self.text(cell)) for cell in section.table.header])
            for cells in section.table.rows:
                table.row([breakable(self.text(_line(cell))) for cell in cells])
        self.pdf.ln(2)


def breakable(text: str) -> str:
    """``text`` with line-break opportunities (zero-width spaces) inside words longer than ``LONG_WORD`` (for table
    cells, which fpdf2 wraps itself)."""
    if all(len(word) <= LONG_WORD for word in text.split()):
        return text
    words = []
    for word in text.split(" "):
        if len(word) <= LONG_WORD:
            words.append(word)
            continue
        pieces = re.split(r"(?<=[/?&=_-])", word)
        words.append(
            _ZWSP.join(piece[i : i + LONG_WORD] for piece in pieces if piece for i in range(0, len(piece), LONG_WORD))
        )
    return " ".join(words)


def _line(statement: Statement) -> str:
    cited = marker(statement.citations)
    return f"{statement.text} {cited}".rstrip()


def to_pdf(document: ReportDocument) -> bytes:
    """The report as a PDF."""
    writer = _Writer()
    pdf = writer.pdf
    pdf.set_title(writer.text(document.title)[:300])
    pdf.set_creator("researchcrew")
    pdf.add_page()
    writer.write(document.title, size=_SIZES[1], bold=True, after=2.5)
    for line in document.about:
        writer.write(line, size=9.0, after=0.5)
    pdf.ln(3)
    if document.toc:
        writer.heading("Contents", 2)
        for section in document.sections:
            writer.write(("    " * (section.level - 2)) + section.heading, size=10.0, after=0.5)
        pdf.ln(3)
    for section in document.sections:
        writer.heading(section.heading, section.level)
        for statement in section.statements:
            writer.write(_line(statement))
        if section.sources:
            writer.write(section.sources_line(), size=9.5)
        if section.table is not None:
            writer.table(section)
    if document.caveats:
        writer.heading("Caveats", 2)
        for caveat in document.caveats:
            writer.write(f"- {caveat}", size=9.5)
    writer.heading("References", 2)
    if not document.references:
        writer.write("No sources were cited.")
    for reference in document.references:
        entry = reference.text()
        writer.write(entry, size=9.5)
    return bytes(pdf.output())
