"""An Evernote export read streaming: the peak memory and time of kb.sources.evernote's listing
(every note read, streaming) against parsing the whole file into one tree first (what a reader
that does not stream holds), side by side in one run on the same export.

    uv run bench/enex_stream.py [--notes N] [--image-kb K] [--json]

The export is synthetic and written to a temp folder: N notes, each a few paragraphs of text, a
tag, and one image resource of K KiB (random bytes, base64, as an attached photo). Each side
runs in a fresh interpreter that first imports the same modules and reads one small note, so
what it adds to its peak RSS (ru_maxrss) is its own. The whole-tree side only parses (it makes
no text): its seconds are a floor, its memory is the point. Last line with --json: one JSON
object.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import REPO_ROOT, cpu_name, format_table

# every side imports the same and reads one small note first (bs4 and markdownify load on first
# use): what each then adds to its peak RSS is its own
PRELUDE = """import json, resource, sys, time
from pathlib import Path
from defusedxml.ElementTree import parse
from kb.sources.evernote import EvernoteSource, enml_text
enml_text("<en-note><div>warm up</div></en-note>", {})
def rss():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
floor = rss()
start = time.perf_counter()
"""
SIDES = {
    "streaming (kb.sources.evernote)": (
        "notes = len(EvernoteSource([Path(sys.argv[1])], 1 << 40).listing(everything=True).items)"
    ),
    "whole tree (defusedxml parse, no text made)": (
        "notes = len(parse(sys.argv[1]).getroot().findall('note'))"
    ),
}
REPORT = """
seconds = time.perf_counter() - start
print(json.dumps({"notes": notes, "seconds": seconds, "added_mb": rss() - floor}))
"""


def write_export(path: Path, notes: int, image_kb: int) -> int:
    """The synthetic export (see the module docstring); its size in bytes."""
    with path.open("w", encoding="utf-8") as out:
        out.write('<?xml version="1.0" encoding="UTF-8"?>\n<en-export>\n')
        for number in range(notes):
            image = os.urandom(image_kb * 1024)
            digest = hashlib.md5(image, usedforsecurity=False).hexdigest()
            text = f"Note {number}: the harbour tide tables and ferry times, week {number}. " * 20
            out.write(
                f"<note><title>Note {number}</title><created>20240301T101500Z</created>"
                f"<tag>bench</tag><content><![CDATA[<en-note><div>{text}</div>"
                f'<en-media hash="{digest}" type="image/jpeg"/></en-note>]]></content>'
                f'<resource><data encoding="base64">{base64.b64encode(image).decode()}</data>'
                "<mime>image/jpeg</mime></resource></note>\n"
            )
        out.write("</en-export>\n")
    return path.stat().st_size


def measure(side: str, export: Path) -> dict[str, float]:
    code = PRELUDE + SIDES[side] + REPORT
    done = subprocess.run(
        [sys.executable, "-c", code, str(export)],
        capture_output=True, text=True, check=True, cwd=REPO_ROOT, timeout=3600,
    )  # fmt: skip
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--notes", type=int, default=400)
    parser.add_argument("--image-kb", type=int, default=256)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.notes < 1 or args.image_kb < 1:
        print("error: --notes and --image-kb must be at least 1", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="enex-bench-") as folder:
        export = Path(folder) / "Bench.enex"
        size = write_export(export, args.notes, args.image_kb)
        found = {side: measure(side, export) for side in SIDES}
    rows = [
        [side, int(got["notes"]), f"{got['seconds']:.2f}", f"{got['added_mb']:.0f}"]
        for side, got in found.items()
    ]
    print(f"{cpu_name()}; export {size / 2**20:.0f} MiB, {args.notes} notes")
    print(format_table(["side", "notes", "seconds", "peak RSS added, MiB"], rows))
    stream, whole = (got["added_mb"] for got in found.values())
    print(f"peak RSS added, whole tree / streaming: {whole / max(stream, 1):.1f}x")
    if args.json:
        print(json.dumps({"export_mb": size / 2**20, "notes": args.notes, "sides": found}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
