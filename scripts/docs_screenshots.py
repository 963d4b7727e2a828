"""Screenshots of the built site's code blocks at a desktop and a phone width, and a check of
what they show: every code block keeps its lines (none wraps) and the copy button covers no
code text. Needs headless Chromium (`chromium`) and a built site (`sh scripts/docs.sh`); not
part of the test command.

    .venv/bin/python scripts/docs_screenshots.py [OUT_DIR]

Writes OUT_DIR/PAGE-WIDTH.png (default /tmp/gpurig-docs-shots) and prints one line per page
and width; exit 1 where a block wraps or the button overlaps its text.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SITE = ROOT / "site"
# A report's FIELD/EXPECTED/FOUND block (try-it, a container field's page), a long YAML line.
PAGES = ("try-it", "findings/container.command", "getting-started")
WIDTHS = (1280, 390)
# Run in the page once Material has added its copy buttons: for each code block, whether a
# line wrapped (more rows than lines) and whether the button's box reaches into the text's.
PROBE = """<script>
window.addEventListener("load", () => setTimeout(() => {
  const found = [];
  for (const code of document.querySelectorAll(".md-typeset pre > code")) {
    const style = getComputedStyle(code);
    const lines = code.textContent.replace(/\\n$/, "").split("\\n").length;
    const inner = code.scrollHeight - parseFloat(style.paddingTop)
      - parseFloat(style.paddingBottom);
    const rows = Math.round(inner / parseFloat(style.lineHeight));
    const box = code.getBoundingClientRect();
    const textRight = box.right - parseFloat(style.borderRightWidth);
    const nav = code.parentElement.querySelector(".md-code__nav");
    const navLeft = nav ? nav.getBoundingClientRect().left : Infinity;
    found.push({lines, rows, covered: navLeft < textRight, text: code.textContent.slice(0, 40)});
  }
  const out = document.createElement("pre");
  out.id = "gpurig-probe";
  out.textContent = JSON.stringify(found);
  document.body.appendChild(out);
}, 500));
</script>"""


def chromium(*args: str) -> str:
    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    if binary is None:
        sys.exit("docs_screenshots: no chromium on the PATH (apt-get install chromium)")
    with tempfile.TemporaryDirectory() as profile:
        command = [binary, "--headless", "--no-sandbox", "--disable-gpu",
                   "--disable-background-networking", "--disable-component-update",
                   "--disable-sync", "--no-first-run", f"--user-data-dir={profile}",
                   "--hide-scrollbars", "--virtual-time-budget=3000", *args]  # fmt: skip
        return subprocess.run(command, capture_output=True, text=True, timeout=120).stdout


def main() -> int:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/gpurig-docs-shots")
    out.mkdir(parents=True, exist_ok=True)
    if not (SITE / "index.html").exists():
        sys.exit("docs_screenshots: no built site: sh scripts/docs.sh")
    failed = False
    for page in PAGES:
        html = SITE / page / "index.html"
        probed = html.with_name("probe.html")  # beside the page: its relative links hold
        probed.write_text(html.read_text(encoding="utf-8").replace("</body>", PROBE + "</body>"))
        try:
            for width in WIDTHS:
                shot = out / f"{page.replace('/', '_')}-{width}.png"
                chromium(f"--window-size={width},1800", f"--screenshot={shot}", html.as_uri())
                dom = chromium(f"--window-size={width},1800", "--dump-dom", probed.as_uri())
                match = re.search(r'<pre id="gpurig-probe">(.*?)</pre>', dom, re.S)
                blocks = json.loads(match[1].replace("&quot;", '"')) if match else None
                if not blocks:
                    print(f"{page} at {width}px: the probe did not run")
                    failed = True
                    continue
                wrapped = [b["text"] for b in blocks if b["rows"] > b["lines"]]
                covered = [b["text"] for b in blocks if b["covered"]]
                failed |= bool(wrapped or covered)
                print(f"{page} at {width}px: {len(blocks)} blocks, wrapped {wrapped}, "
                      f"button over text {covered}; {shot}")  # fmt: skip
        finally:
            probed.unlink()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
