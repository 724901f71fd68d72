"""Headless Chromium (Debian `chromium`) for the trace-page tests: a DOM dump after layout and a
screenshot decoded to pixels. The tests fail, never skip, when Chromium is missing (`.ci/run`
installs it)."""

from __future__ import annotations

import shutil
import struct
import subprocess
import zlib
from pathlib import Path

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run"]


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    assert found, "Chromium is required for the trace-page tests: apt-get install chromium (see .ci/run)"
    return found


def run(page: Path, profile: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    command = [chromium(), *FLAGS, f"--user-data-dir={profile}", *extra, page.as_uri()]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=True)


def dump_dom(page: Path, profile: Path) -> str:
    return run(page, profile, "--dump-dom").stdout


def screenshot(page: Path, profile: Path, target: Path, size: tuple[int, int] = (1200, 3000)) -> Path:
    run(page, profile, f"--window-size={size[0]},{size[1]}", f"--screenshot={target}")
    return target


def pixels(png: Path) -> tuple[int, int, set[tuple[int, int, int]]]:
    """(width, height, the set of RGB colours) of an 8-bit RGB/RGBA, non-interlaced PNG."""
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, header = 8, b"", None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        chunk = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", chunk)
        elif kind == b"IDAT":
            idat += chunk
        pos += 12 + length
    assert header is not None
    width, height, depth, colour_type, _, _, interlace = header
    assert depth == 8 and colour_type in (2, 6) and interlace == 0, header
    channels = 3 if colour_type == 2 else 4
    stride = width * channels
    raw = zlib.decompress(idat)
    previous = bytearray(stride)
    colours: set[tuple[int, int, int]] = set()
    for row in range(height):
        start = row * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1:start + 1 + stride])
        for i in range(stride):
            left = line[i - channels] if i >= channels else 0
            up = previous[i]
            corner = previous[i - channels] if i >= channels else 0
            if kind == 1:
                line[i] = (line[i] + left) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + up) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + ((left + up) >> 1)) & 0xFF
            elif kind == 4:
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                line[i] = (line[i] + (left if pa <= pb and pa <= pc else up if pb <= pc else corner)) & 0xFF
        colours.update(tuple(line[i:i + 3]) for i in range(0, stride, channels))  # type: ignore[misc]
        previous = line
    return width, height, colours
