"""Read an ``index.html`` back as a reader sees it (stdlib :mod:`html.parser`): its claim cards
(verdict, headline, evidence, figure) and the "across runs" table, and list what a reader would
miss: a card without a verdict or headline, a non-PASS card without evidence, a figure that
does not resolve, an external URL (the page must open offline)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote

__all__ = ["Card", "Page", "page_problems", "read_page"]

_EXTERNAL = re.compile(r"(?i)\b(?:https?|ftp)://|(?:src|href)\s*=\s*[\"']?//")


@dataclass
class Card:
    """One claim card: its anchor id, claim id, verdict and texts, and its figure's ``src``."""

    anchor: str
    claim: str = ""
    verdict: str = ""
    headline: str = ""
    evidence: str = ""
    statement: str = ""
    figure: str | None = None


@dataclass
class Page:
    """The cards in page order, the overview's tiles (claim id -> verdict), the across-runs
    table (column labels, rows of cell texts) and the raw page."""

    cards: list[Card] = field(default_factory=list)
    tiles: dict[str, str] = field(default_factory=dict)
    runs_columns: list[str] = field(default_factory=list)
    runs_rows: list[list[str]] = field(default_factory=list)
    html: str = ""


class _Reader(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.page = Page()
        self._stack: list[tuple[str, set[str]]] = []
        self._capture: str | None = None  # which card field the text goes to
        self._depth = 0
        self._in_runs = False
        self._cell: list[str] | None = None
        self._row: list[str] | None = None
        self._tile: list[str] | None = None
        self._tile_verdict = ""

    def _card(self) -> Card | None:
        return self.page.cards[-1] if self.page.cards and self._in_card() else None

    def _in_card(self) -> bool:
        return any(tag == "article" and "card" in cls for tag, cls in self._stack)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        cls = set(a.get("class", "").split())
        if tag == "article" and "card" in cls:
            self.page.cards.append(Card(anchor=a.get("id", "")))
        if tag not in ("img", "br", "meta", "link", "input", "hr"):
            self._stack.append((tag, cls))
        card = self._card()
        if card is not None:
            if tag == "span" and "verdict" in cls and not card.verdict and self._in("header"):
                self._begin("verdict")
            elif tag == "h3" and not card.claim:
                self._begin("claim")
            elif tag == "p" and cls & {"headline", "evidence", "statement"}:
                self._begin(next(iter(cls & {"headline", "evidence", "statement"})))
            elif tag == "img" and card.figure is None:
                card.figure = a.get("src", "")
        if tag == "section" and a.get("id") == "across-runs":
            self._in_runs = True
        if self._in_runs and tag == "tr":
            self._row = []
        if self._in_runs and tag in ("td", "th"):
            self._cell = []
        if tag == "a" and "tile" in cls:
            self._tile = []
            self._tile_verdict = next((c for c in cls if c != "tile"), "")

    def _in(self, tag: str) -> bool:
        return any(t == tag for t, _ in self._stack)

    def _begin(self, what: str) -> None:
        self._capture, self._depth = what, len(self._stack)

    def handle_endtag(self, tag: str) -> None:
        if self._in_runs and tag in ("td", "th") and self._cell is not None and \
                self._row is not None:
            self._row.append(" ".join("".join(self._cell).split()))
            self._cell = None
        if self._in_runs and tag == "tr" and self._row is not None:
            if not self.page.runs_columns:
                self.page.runs_columns = self._row[1:]
            else:
                self.page.runs_rows.append(self._row)
            self._row = None
        if tag == "section" and self._in_runs:
            self._in_runs = False
        if tag == "a" and self._tile is not None:
            text = "".join(self._tile).split()
            if text:
                self.page.tiles[text[0]] = self._tile_verdict
            self._tile = None
        if self._stack and self._stack[-1][0] == tag:
            self._stack.pop()
        if self._capture is not None and len(self._stack) < self._depth:
            self._capture = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)
        if self._tile is not None:
            self._tile.append(" " + data)
        card = self._card()
        if card is not None and self._capture is not None:
            old = getattr(card, self._capture)
            setattr(card, self._capture, old + data)


def read_page(html: str) -> Page:
    """The cards, tiles and across-runs table of a report page."""
    reader = _Reader()
    reader.feed(html)
    reader.close()
    page = reader.page
    page.html = html
    for card in page.cards:
        for name in ("claim", "verdict", "headline", "evidence", "statement"):
            setattr(card, name, " ".join(getattr(card, name).split()))
    return page


def _resolves(src: str, base: Path | None) -> bool:
    if src.startswith("data:image/"):
        return True
    return base is not None and (Path(base) / unquote(src)).is_file()


def page_problems(page: Page, base: Path | None = None) -> list[str]:
    """What a reader would miss, one line each (empty: none): a card without a verdict or a
    headline, a non-PASS card without evidence, a figure whose ``src`` is neither a ``data:``
    URI nor a file that exists under ``base``, any external URL."""
    out = []
    if not page.cards:
        out.append("the page has no claim cards")
    for c in page.cards:
        who = c.claim or c.anchor or "a card"
        if not c.verdict:
            out.append(f"{who}: no verdict")
        if not c.headline:
            out.append(f"{who}: no headline")
        if c.verdict and c.verdict != "PASS" and not c.evidence:
            out.append(f"{who}: {c.verdict} without evidence")
        if c.figure is not None and not _resolves(c.figure, base):
            out.append(f"{who}: figure {c.figure[:80]!r} does not resolve")
    found = _EXTERNAL.search(page.html)
    if found:
        at = found.start()
        out.append(f"external URL at character {at}: {page.html[at:at + 60]!r}")
    return out
