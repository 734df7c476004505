"""The binding's emit() reference leak is compensated, and the window never emits around it."""

import re
import sys
from pathlib import Path

from PySide6.QtCore import QObject, Signal

from app.ui.qt_fix import emit


class Source(QObject):
    happened = Signal(int, object)


def test_emit_keeps_the_reference_count_of_true():
    s = Source()
    got = []
    s.happened.connect(lambda n, d: got.append(n))
    before = sys.getrefcount(True)
    for i in range(2000):
        emit(s.happened, i, {"stopped": True})
    assert len(got) == 2000
    assert sys.getrefcount(True) >= before


def test_app_ui_emits_only_through_the_helper():
    ui = Path(__file__).resolve().parents[2] / "app" / "ui"
    direct = [
        f"{p.name}:{n}"
        for p in sorted(ui.glob("*.py"))
        if p.name != "qt_fix.py"
        for n, line in enumerate(p.read_text().splitlines(), 1)
        if re.search(r"\.emit\(", line)
    ]
    assert direct == []
