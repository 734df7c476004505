"""Render the app icon (resources/icons/llambda.svg, the one the window uses) for the platforms.

Writes under packaging/icons/:
    hicolor/scalable/apps/llambda.svg and hicolor/NxN/apps/llambda.png   Linux icon theme layout
    llambda.ico    Windows: PNG images of 16..256 px in one ICO container
    llambda.icns   macOS: PNG images of 16..1024 px in one ICNS container
Needs only PySide6 (QSvgRenderer + QPainter); the ICO and ICNS containers are written here from
their published layouts. Deterministic for one Qt version. Run: python packaging/make_icons.py
"""

from __future__ import annotations

import os
import shutil
import struct
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "resources" / "icons" / "llambda.svg"
OUT = ROOT / "packaging" / "icons"
PNG_SIZES = (16, 24, 32, 48, 64, 128, 256, 512)
ICO_SIZES = (16, 24, 32, 48, 64, 128, 256)
# ICNS element types holding PNG data, by pixel size (several types share a size: @2x variants)
ICNS_TYPES = [
    (b"icp4", 16),
    (b"icp5", 32),
    (b"icp6", 64),
    (b"ic07", 128),
    (b"ic08", 256),
    (b"ic09", 512),
    (b"ic10", 1024),
    (b"ic11", 32),
    (b"ic12", 64),
    (b"ic13", 256),
    (b"ic14", 512),
]


def render_png(renderer, size: int) -> bytes:
    from PySide6.QtCore import QBuffer, QByteArray, QIODevice
    from PySide6.QtGui import QImage, QPainter

    image = QImage(size, size, QImage.Format_ARGB32_Premultiplied)
    image.fill(0)
    painter = QPainter(image)
    painter.setRenderHint(QPainter.Antialiasing)
    painter.setRenderHint(QPainter.SmoothPixmapTransform)
    renderer.render(painter)
    painter.end()
    data = QByteArray()
    buf = QBuffer(data)
    buf.open(QIODevice.WriteOnly)
    image.save(buf, "PNG")
    buf.close()
    return bytes(data)


def ico_bytes(pngs: dict[int, bytes]) -> bytes:
    """ICONDIR, one ICONDIRENTRY per image (0 means 256 px), then the PNG data."""
    sizes = sorted(pngs)
    header = struct.pack("<HHH", 0, 1, len(sizes))
    offset = 6 + 16 * len(sizes)
    entries, blobs = b"", b""
    for s in sizes:
        data = pngs[s]
        entries += struct.pack("<BBBBHHII", s % 256, s % 256, 0, 0, 1, 32, len(data), offset)
        offset += len(data)
        blobs += data
    return header + entries + blobs


def icns_bytes(pngs: dict[int, bytes]) -> bytes:
    """'icns' + total length, then (type, length including its 8-byte header, PNG data) elements."""
    body = b"".join(kind + struct.pack(">I", 8 + len(pngs[s])) + pngs[s] for kind, s in ICNS_TYPES)
    return b"icns" + struct.pack(">I", 8 + len(body)) + body


def main() -> int:
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtGui import QGuiApplication
    from PySide6.QtSvg import QSvgRenderer

    app = QGuiApplication.instance() or QGuiApplication([sys.argv[0]])  # noqa: F841 (fonts, images)
    renderer = QSvgRenderer(str(SOURCE))
    if not renderer.isValid():
        print(f"make_icons: cannot read {SOURCE}", file=sys.stderr)
        return 1
    sizes = sorted(set(PNG_SIZES) | set(ICO_SIZES) | {s for _, s in ICNS_TYPES})
    pngs = {s: render_png(renderer, s) for s in sizes}
    hicolor = OUT / "hicolor"
    (hicolor / "scalable" / "apps").mkdir(parents=True, exist_ok=True)
    shutil.copyfile(SOURCE, hicolor / "scalable" / "apps" / "llambda.svg")
    for s in PNG_SIZES:
        d = hicolor / f"{s}x{s}" / "apps"
        d.mkdir(parents=True, exist_ok=True)
        (d / "llambda.png").write_bytes(pngs[s])
    (OUT / "llambda.ico").write_bytes(ico_bytes({s: pngs[s] for s in ICO_SIZES}))
    (OUT / "llambda.icns").write_bytes(icns_bytes(pngs))
    print(f"make_icons: {len(PNG_SIZES)} PNG sizes, llambda.ico, llambda.icns in {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
