"""Screenshot a reproduce report (index.html) as a reader's browser shows it: headless Chromium.

    python tools/report_shot.py OUT/index.html shot.png [--width 1300 --height 1600]
    python tools/report_shot.py --smoke [shot.png]     # make report-shot

``--smoke`` first runs every claim at its smoke settings (the test suite's tiny ones, about a
minute on a laptop) into a new temporary folder, then screenshots its index.html (into that
folder unless a path is given). After the screenshot the page is read back as a reader sees it
(:mod:`depthscale.report.page`) and what a reader would miss is listed.

Chromium is found as ``chromium``, ``chromium-browser`` or ``google-chrome`` on the PATH (Debian:
``apt-get install chromium``). The page is opened from its file, offline; the screenshot is the
first screen at the given window size. Exit status 2 with one line when no browser is found.
"""

from __future__ import annotations

import argparse
import dataclasses
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

BROWSERS = ("chromium", "chromium-browser", "google-chrome")


def find_browser() -> str | None:
    """The first of :data:`BROWSERS` on the PATH, or None."""
    for name in BROWSERS:
        path = shutil.which(name)
        if path:
            return path
    return None


def screenshot(page: Path, out: Path, width: int = 1300, height: int = 1600,
               timeout: float = 120.0) -> Path:
    """Render ``page`` with headless Chromium into the PNG ``out``; returns ``out``."""
    browser = find_browser()
    if browser is None:
        raise FileNotFoundError(
            f"no Chromium found (looked for {', '.join(BROWSERS)}): apt-get install chromium")
    page, out = Path(page).resolve(), Path(out).resolve()
    if not page.is_file():
        raise FileNotFoundError(f"no such page: {page}")
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="report-shot-") as profile:
        cmd = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
               "--no-first-run", "--no-default-browser-check", f"--user-data-dir={profile}",
               f"--window-size={width},{height}", f"--screenshot={out}", page.as_uri()]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    if done.returncode != 0 or not out.is_file():
        raise RuntimeError(f"{Path(browser).name} exited {done.returncode}: "
                           f"{done.stderr.strip()[-400:]}")
    return out


def smoke_reproduce(out_dir: Path) -> Path:
    """Every claim at its smoke settings into ``out_dir`` (``reproduce``); returns its page."""
    from depthscale.claims import CLAIMS
    from depthscale.cli import main as cli

    for cid, c in list(CLAIMS.items()):  # quick -> smoke: seconds a claim
        CLAIMS[cid] = dataclasses.replace(c, settings={**c.settings, "quick": c.settings["smoke"]})
    code = cli(["reproduce", "--out", str(out_dir)])
    if code not in (0, None):
        raise RuntimeError(f"the smoke reproduce exited {code}")
    return out_dir / "index.html"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("paths", type=Path, nargs="*", metavar="PAGE OUT",
                        help="the index.html to render and the PNG to write (with --smoke: "
                        "only the PNG, optional)")
    parser.add_argument("--smoke", action="store_true",
                        help="first run every claim at its smoke settings into a temp folder")
    parser.add_argument("--width", type=int, default=1300)
    parser.add_argument("--height", type=int, default=1600)
    args = parser.parse_args(argv)
    if find_browser() is None:  # before a minute of smoke runs
        print(f"report_shot: no Chromium found (looked for {', '.join(BROWSERS)}): "
              "apt-get install chromium", file=sys.stderr)
        return 2
    if args.smoke:
        if len(args.paths) > 1:
            parser.error("--smoke takes at most the PNG to write")
        folder = Path(tempfile.mkdtemp(prefix="depthscale-report-shot-"))
        args.page = smoke_reproduce(folder / "out")
        args.out = args.paths[0] if args.paths else folder / "index-1300x1600.png"
    elif len(args.paths) != 2:
        parser.error("give the index.html to render and the PNG to write (or --smoke)")
    else:
        args.page, args.out = args.paths
    try:
        path = screenshot(args.page, args.out, args.width, args.height)
    except FileNotFoundError as exc:
        print(f"report_shot: {exc}", file=sys.stderr)
        return 2
    except (RuntimeError, subprocess.TimeoutExpired) as exc:
        print(f"report_shot: {exc}", file=sys.stderr)
        return 1
    print(f"screenshot: {path} ({args.width}x{args.height}) of {args.page}")
    try:  # what a reader would miss on the page, when depthscale is importable
        from depthscale.report.page import page_problems, read_page
    except ImportError:
        return 0
    page = read_page(args.page.read_text(encoding="utf-8"))
    problems = page_problems(page, args.page.parent)
    print(f"{len(page.cards)} claim card(s), {len(page.runs_columns)} run(s) across runs; "
          f"{len(problems)} problem(s)" + "".join(f"\n  {p}" for p in problems))
    return 0


if __name__ == "__main__":
    sys.exit(main())
