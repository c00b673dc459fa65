"""A real headless Chromium for page tests: the DOM it builds, a screenshot, its console.

`chromium()` finds the browser (Debian's `chromium` package; CI installs it). `run()` loads a
file with console logging to stderr (`--enable-logging=stderr --v=0` prints every console
message as a `CONSOLE` line, with failed resource loads among them). `png_pixels()` decodes a
PNG with zlib alone (8-bit RGB/RGBA, all five row filters), so a blank screenshot is told from
a drawn one without an imaging library.
"""

import os
import shutil
import struct
import subprocess
import zlib
from pathlib import Path

NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def chromium() -> str | None:
    for n in NAMES:
        p = shutil.which(n)
        if p:
            return p
    return None


def run(exe: str, page: Path, *args: str, profile: Path, timeout: float = 120.0
        ) -> subprocess.CompletedProcess:
    """Chromium headless on `page` (a file URL): no network use, a throwaway profile."""
    argv = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
            "--disable-extensions", "--disable-background-networking", "--disable-sync",
            "--enable-logging=stderr", "--v=0", f"--user-data-dir={profile}",
            "--window-size=1100,2600", *args, page.resolve().as_uri()]
    env = dict(os.environ, HOME=str(profile))
    return subprocess.run(argv, capture_output=True, timeout=timeout, env=env)


def console_lines(stderr: bytes) -> list[str]:
    """The console messages Chromium logged (errors, warnings, failed loads)."""
    return [line for line in stderr.decode("utf-8", "replace").splitlines()
            if "CONSOLE" in line or "Failed to load resource" in line]


def png_pixels(data: bytes) -> tuple[int, int, list[bytes]]:
    """(width, height, rows of RGB(A) bytes) of an 8-bit truecolour PNG."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, width, height, channels = 8, b"", 0, 0, 0
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        chunk = data[pos + 8:pos + 8 + n]
        pos += 12 + n
        if kind == b"IHDR":
            width, height, depth, ctype = struct.unpack(">IIBB", chunk[:10])
            assert depth == 8 and ctype in (2, 6), f"unsupported PNG (depth {depth}, type {ctype})"
            channels = 3 if ctype == 2 else 4
        elif kind == b"IDAT":
            idat += chunk
        elif kind == b"IEND":
            break
    raw = zlib.decompress(idat)
    stride = width * channels
    rows: list[bytes] = []
    prev = bytearray(stride)
    for y in range(height):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - channels] if i >= channels else 0
            b = prev[i]
            c = prev[i - channels] if i >= channels else 0
            if f == 1:
                line[i] = (line[i] + a) & 0xFF
            elif f == 2:
                line[i] = (line[i] + b) & 0xFF
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 0xFF
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                line[i] = (line[i] + pred) & 0xFF
        rows.append(bytes(line))
        prev = line
    return width, height, rows


def non_white(data: bytes) -> tuple[int, int]:
    """(pixels not white, pixels in all) of a PNG screenshot."""
    width, height, rows = png_pixels(data)
    channels = len(rows[0]) // width if rows else 3
    count = 0
    for row in rows:
        for x in range(0, len(row), channels):
            if row[x] < 240 or row[x + 1] < 240 or row[x + 2] < 240:
                count += 1
    return count, width * height
