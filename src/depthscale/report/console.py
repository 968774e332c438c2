"""A rich table of claim results for the terminal."""

from __future__ import annotations

from typing import Any

from rich.table import Table
from rich.text import Text

from depthscale.report import _fmt
from depthscale.report.headline import headline_parts
from depthscale.report.schema import validate_results

__all__ = ["VERDICT_STYLES", "console_table"]

VERDICT_STYLES: dict[str, str] = {
    "PASS": "bold green", "FAIL": "bold red", "REFUTED": "bold magenta",
    "UNSTABLE": "bold dark_orange", "INCONCLUSIVE": "bold blue", "SKIP": "bold yellow",
}


def _quantities(r: dict[str, Any]) -> Text:
    text = Text()
    for j, (name, value, band) in enumerate(_fmt.quantities(r)):
        if j:
            text.append("\n")
        shown = "not measured" if value is None else _fmt.number(value)
        missed = _fmt.in_band(value, band) is False
        text.append(f"{name} = ")
        text.append(shown, style="red" if missed else "")
        if band is not None:  # readable without colour too: "outside" marks a miss
            where = "outside" if missed else "band"
            text.append(f" ({where} {_fmt.band_text(band)})", style="dim")
    return text


def _headline(r: dict[str, Any]) -> Text:
    hl = r.get("headline")
    if not hl:
        return Text("no headline recorded", style="dim")
    paper, ours, band, inside = headline_parts(hl)
    text = Text(f"{hl['label']}\n", style="dim")
    text.append(f"paper: {paper}, ")
    text.append(ours, style="bold red" if inside is False else "bold")
    if band:  # readable without colour too: "outside" marks a miss
        text.append(f", {band}" + (" (outside)" if inside is False else ""))
    return text


def console_table(results: list[dict[str, Any]], *, details: bool = False) -> Table:
    """Claim id, title, verdict, the headline line (paper vs ours) and time; ``details`` adds
    every measured value against its band. The caption sums up the run (counts per verdict,
    total time, scale)."""
    clean = validate_results(results)
    s = _fmt.summary(clean)
    counts = "  ".join(f"{v} {n}" for v, n in s["counts"].items())
    table = Table(
        title="claims",
        caption=f"{counts}  |  {_fmt.duration(s['seconds'])} total  |  scale {s['scale']}",
        show_lines=True,
    )
    table.add_column("claim", style="bold", no_wrap=True)
    table.add_column("title")
    table.add_column("verdict", no_wrap=True)
    table.add_column("headline: paper vs ours")
    if details:
        table.add_column("measured (band)")
    table.add_column("time", justify="right", no_wrap=True)
    for r in clean:
        reason = f"\n[{r['reason']}]" if r["reason"] and r["verdict"] != "PASS" else ""
        control = f"\nNEGATIVE CONTROL: {r['control']}" if r["control"] else ""
        table.add_row(
            Text(r["id"]),
            Text(r["title"] + control + reason + _fmt.seeds_text(r)),
            Text(r["verdict"], style=VERDICT_STYLES[r["verdict"]]),
            _headline(r),
            *([_quantities(r)] if details else []),
            _fmt.duration(r["seconds"]),
        )
    return table
