"""Benchmark of the `dumps compare` HTML report at scale: size and time to load in headless chromium.

For each pair count (default 200 and 1000; synthetic results of a 28-layer model, 227 judged modules
per pair, no msprobe run) it writes the report and opens it with `chromium --headless --dump-dom`:
the page's size in MB, the browser's wall time (minus that of an empty page, its start-up), and
the time the page itself says its summary and overview were drawn (`data-ready`, ms since
navigation). Skips with a line when no chromium is installed (`apt-get install chromium`).
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from test_dumps_report import chromium, load, write_synthetic


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pairs", type=int, nargs="*", default=[200, 1000])
    args = parser.parse_args()
    browser = chromium()
    if browser is None:
        print("report: skipped, no chromium installed (apt-get install chromium)")
        return
    with tempfile.TemporaryDirectory() as scratch:
        blank = Path(scratch) / "blank.html"
        blank.write_text("<!DOCTYPE html><html><body></body></html>")
        start_up = min(load(blank, browser)[0] for _ in range(2))
        for pairs in args.pairs:
            page = Path(scratch) / f"report{pairs}.html"
            write_synthetic(page, pairs)
            seconds, dom = load(page, browser)
            ready = re.search(r'data-ready="(\d+)"', dom)
            drawn = f"{int(ready.group(1)) / 1000:.2f} s" if ready else "never (the script did not finish)"
            print(f"report, {pairs:>5} pairs: {page.stat().st_size / 1e6:5.1f} MB, loaded in headless chromium in "
                  f"{seconds - start_up:5.2f} s (wall {seconds:.2f} s - start-up {start_up:.2f} s); summary and "
                  f"overview drawn at {drawn}")


if __name__ == "__main__":
    main()
