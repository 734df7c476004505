"""Linux desktop integration and icons: the desktop entry, the GGUF MIME type (checked by
installing it into a temporary XDG data folder and asking Qt's MIME database), the install
script, and the icon containers (read back with Pillow where it is installed)."""

from __future__ import annotations

import configparser
import os
import shutil
import struct
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path


ROOT = Path(__file__).resolve().parents[2]
LINUX = ROOT / "packaging" / "linux"
ICONS = ROOT / "packaging" / "icons"
NS = "{http://www.freedesktop.org/standards/shared-mime-info}"


def desktop_entry() -> dict[str, str]:
    p = configparser.ConfigParser(interpolation=None, delimiters=("=",))
    p.optionxform = str
    p.read(LINUX / "llambda.desktop", encoding="utf-8")
    return dict(p["Desktop Entry"])


def test_desktop_entry_opens_gguf_files():
    e = desktop_entry()
    assert e["Type"] == "Application" and e["Name"] == "Llambda"
    assert e["Exec"].split()[0] == "Llambda" and e["Exec"].endswith("%f")
    assert e["Terminal"] == "false"
    assert "application/x-gguf" in e["MimeType"].split(";")
    assert e["Icon"] == "llambda"
    assert (ICONS / "hicolor" / "scalable" / "apps" / "llambda.svg").is_file()


def test_desktop_entry_passes_desktop_file_validate():
    r = subprocess.run(["desktop-file-validate", str(LINUX / "llambda.desktop")], capture_output=True, text=True)
    assert r.returncode == 0 and "error" not in r.stdout + r.stderr, r.stdout + r.stderr


def test_mime_xml_says_gguf_by_magic_and_extension():
    root = ET.parse(LINUX / "llambda-gguf.xml").getroot()
    assert root.tag == f"{NS}mime-info"
    (mt,) = root.findall(f"{NS}mime-type")
    assert mt.get("type") == "application/x-gguf"
    assert [g.get("pattern") for g in mt.findall(f"{NS}glob")] == ["*.gguf"]
    (match,) = mt.findall(f"{NS}magic/{NS}match")
    assert (match.get("type"), match.get("offset"), match.get("value")) == ("string", "0", "GGUF")


MIME_PROBE = """
import sys
from PySide6.QtCore import QMimeDatabase
db = QMimeDatabase()
for path in sys.argv[1:]:
    print(db.mimeTypeForFile(path).name())
"""


def test_installed_mime_type_is_what_qt_sees(tmp_path):
    data = tmp_path / "share"
    (data / "mime" / "packages").mkdir(parents=True)
    shutil.copy(LINUX / "llambda-gguf.xml", data / "mime" / "packages")
    subprocess.run(["update-mime-database", str(data / "mime")], check=True, capture_output=True)
    named = tmp_path / "model.gguf"
    named.write_bytes(b"\0" * 64)  # by extension
    sniffed = tmp_path / "3f2a9c"  # a blob without extension, as in download caches
    sniffed.write_bytes(b"GGUF\x03\0\0\0" + b"\0" * 56)  # by magic
    other = tmp_path / "notes"
    other.write_bytes(b"\x01\x02\x03\x04" * 16)
    env = dict(os.environ, XDG_DATA_DIRS=str(data), XDG_DATA_HOME=str(tmp_path / "none"), QT_QPA_PLATFORM="offscreen")
    r = subprocess.run(
        [sys.executable, "-c", MIME_PROBE, str(named), str(sniffed), str(other)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["application/x-gguf", "application/x-gguf", "application/octet-stream"]


def test_install_script_installs_and_uninstalls_in_a_fake_home(tmp_path):
    """install.sh against a stand-in bundle: entry with an absolute Exec, MIME, icons; then gone."""
    bundle = tmp_path / "Llambda"
    (bundle / "linux").mkdir(parents=True)
    exe = bundle / "Llambda"
    exe.write_text("#!/bin/sh\necho llambda\n")
    exe.chmod(0o755)
    for name in ("llambda.desktop", "llambda-gguf.xml", "install.sh"):
        shutil.copy(LINUX / name, bundle / "linux" / name)
    shutil.copytree(ICONS / "hicolor", bundle / "linux" / "icons" / "hicolor")
    home = tmp_path / "home"
    home.mkdir()
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home)}
    r = subprocess.run(["sh", str(bundle / "linux" / "install.sh")], env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    share = home / ".local" / "share"
    prefix = share / "llambda" / "app"
    entry = (share / "applications" / "llambda.desktop").read_text()
    assert f'Exec="{prefix}/Llambda" %f' in entry
    assert (share / "mime" / "packages" / "llambda-gguf.xml").is_file()
    assert (share / "icons" / "hicolor" / "48x48" / "apps" / "llambda.png").is_file()
    assert (prefix / "Llambda").is_file() and (home / ".local" / "bin" / "llambda").is_symlink()
    r = subprocess.run(
        ["sh", str(bundle / "linux" / "install.sh"), "--uninstall"], env=env, capture_output=True, text=True
    )
    assert r.returncode == 0, r.stderr
    assert not prefix.exists() and not (share / "applications" / "llambda.desktop").exists()
    assert not (home / ".local" / "bin" / "llambda").exists()
    assert not list((share / "icons").rglob("llambda.*"))


def _png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


def test_icon_pngs_have_their_sizes():
    for d in (ICONS / "hicolor").iterdir():
        if d.name == "scalable":
            continue
        w, h = (int(x) for x in d.name.split("x"))
        assert _png_size((d / "apps" / "llambda.png").read_bytes()) == (w, h)


def test_ico_and_icns_containers():
    ico = (ICONS / "llambda.ico").read_bytes()
    reserved, kind, count = struct.unpack_from("<HHH", ico)
    assert (reserved, kind) == (0, 1) and count >= 5
    sizes = set()
    for i in range(count):
        w, _h, _c, _r, _planes, _bpp, n, off = struct.unpack_from("<BBBBHHII", ico, 6 + 16 * i)
        assert _png_size(ico[off : off + n])[0] == (w or 256)
        sizes.add(w or 256)
    assert {16, 32, 48, 256} <= sizes
    icns = (ICONS / "llambda.icns").read_bytes()
    assert icns[:4] == b"icns" and struct.unpack(">I", icns[4:8])[0] == len(icns)
    pos, kinds = 8, set()
    while pos < len(icns):
        kind, n = icns[pos : pos + 4], struct.unpack(">I", icns[pos + 4 : pos + 8])[0]
        _png_size(icns[pos + 8 : pos + n])
        kinds.add(kind)
        pos += n
    assert pos == len(icns) and {b"ic07", b"ic08", b"ic09", b"ic10"} <= kinds


def test_pillow_reads_the_icons():
    from PIL import Image

    with Image.open(ICONS / "llambda.ico") as im:
        assert im.format == "ICO" and (256, 256) in im.info["sizes"]
    with Image.open(ICONS / "llambda.icns") as im:
        assert im.format == "ICNS" and im.size == (1024, 1024)
