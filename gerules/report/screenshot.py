"""A PNG of the HTML report, rendered by a headless Chromium (when one is installed).

Invariants:
- Chromium runs with a fresh, temporary profile (``--user-data-dir``), no sandbox, no GPU, no
  background networking or component updates, and every host name resolving to nothing, so
  the screenshot proves the page renders offline; the profile is deleted afterwards.
- ``screenshot`` returns the PNG's path only when Chromium wrote a PNG (checked by its
  signature); any failure is a ``RuntimeError`` with Chromium's last stderr line.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
PNG = b"\x89PNG\r\n\x1a\n"


def find_chromium() -> str | None:
    for name in NAMES:
        path = shutil.which(name)
        if path:
            return path
    return None


def screenshot(html: str | Path, png: str | Path, *, width: int = 1000, height: int = 3000,
               chromium: str | None = None, timeout: float = 120.0) -> Path:
    """Render ``html`` at ``width`` x ``height`` CSS pixels into ``png``."""
    exe = chromium or find_chromium()
    if exe is None:
        raise RuntimeError("no Chromium found (apt-get install chromium)")
    out = Path(png).resolve()
    with tempfile.TemporaryDirectory(prefix="gerules-chromium-") as profile:
        cmd = [exe, "--headless", "--no-sandbox", "--disable-gpu",
               "--disable-background-networking", "--disable-component-update",
               "--no-first-run", "--disable-extensions", "--disable-sync", "--hide-scrollbars",
               "--host-resolver-rules=MAP * ~NOTFOUND", f"--user-data-dir={profile}",
               f"--window-size={width},{height}", f"--screenshot={out}",
               Path(html).resolve().as_uri()]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                              check=False)
    if not out.is_file() or out.read_bytes()[:8] != PNG:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"chromium exited {done.returncode} without a PNG: {last}")
    return out


def png_size(path: str | Path) -> tuple[int, int]:
    """Width and height from a PNG's IHDR chunk."""
    head = Path(path).read_bytes()[:24]
    return int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")
