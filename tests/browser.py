"""Opening a page in headless Chromium (Debian's `chromium`): what its
console said, and how many of its images decoded and take up space."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

CHECK = ('<script>window.addEventListener("load", () => { const i = [...document.images]; '
         'document.body.dataset.figures = i.filter(x => x.complete && x.naturalWidth > 0 '
         '&& x.getBoundingClientRect().height > 100).length + "/" + i.length; });</script>')


def open_page(page: Path, work: Path) -> tuple[list[str], str]:
    """(console lines, 'visible/all' images) of @page, read from a copy with
    a script that counts its images once it has loaded."""
    copy = work / f"checked-{page.name}"
    copy.write_text(page.read_text().replace("</body>", CHECK + "</body>"))
    proc = subprocess.run(["chromium", "--headless", "--no-sandbox", "--disable-gpu",
                           "--enable-logging=stderr", "--v=0", "--dump-dom",
                           copy.resolve().as_uri()],
                          capture_output=True, text=True, timeout=180, check=True)
    console = [line for line in proc.stderr.splitlines() if ":CONSOLE" in line]
    found = re.search(r'data-figures="(\d+/\d+)"', proc.stdout)
    return console, found.group(1) if found else "no load event"


def screenshot(page: Path, png: Path, width: int = 1200, height: int = 1800) -> None:
    subprocess.run(["chromium", "--headless", "--no-sandbox", "--disable-gpu",
                    "--hide-scrollbars", f"--window-size={width},{height}",
                    f"--screenshot={png.resolve()}", page.resolve().as_uri()],
                   capture_output=True, timeout=180, check=True)
