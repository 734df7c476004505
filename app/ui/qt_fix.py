"""Work-arounds for bugs of the Qt binding that would otherwise crash a long session, and for a
gap in its type stubs.

PySide6 6.12.0: `SignalInstance.emit()` returns True without taking a reference to it, so every
emit from Python costs True one reference; after a few thousand emits (minutes of streaming) the
interpreter frees True and aborts ("bool_dealloc: deallocating True or False"). `emit()` below
gives the reference back, and only when a probe at import shows the binding is affected, so it
stays correct once the binding is fixed (an extra reference to True is harmless anyway).
"""

from __future__ import annotations

import ctypes
import sys

from typing import cast

from PySide6.QtCore import QObject, Signal, SignalInstance
from PySide6.QtWidgets import QApplication

_incref = ctypes.pythonapi.Py_IncRef
_incref.argtypes = [ctypes.py_object]
_incref.restype = None


class _Probe(QObject):
    fired = Signal()


def _emit_loses_a_reference() -> bool:
    probe = _Probe()
    before = sys.getrefcount(True)
    for _ in range(8):
        probe.fired.emit()
    return sys.getrefcount(True) < before


EMIT_LOSES_TRUE = _emit_loses_a_reference()
if EMIT_LOSES_TRUE:  # give back what the probe took
    for _ in range(8):
        _incref(True)


def emit(signal: SignalInstance, *args: object) -> None:
    """`signal.emit(*args)`, without the binding's reference leak (see the module docstring)."""
    result = signal.emit(*args)  # type: ignore[func-returns-value]  # PySide6 6.12: True, its stub says None
    if EMIT_LOSES_TRUE and result is True:
        _incref(True)


def application() -> QApplication | None:
    """The running QApplication, or None. The window's process makes a QApplication (never a
    bare QCoreApplication), but the stubs type `QApplication.instance()` as QCoreApplication."""
    return cast("QApplication | None", QApplication.instance())


__all__ = ["application", "emit", "EMIT_LOSES_TRUE"]
