"""Light and dark themes that follow the system: a style sheet from resources/ per scheme,
switched again when the system's colour scheme changes."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication, QIcon, QPalette
from PySide6.QtWidgets import QApplication

from app.bundled import resource


def system_is_dark(app: QGuiApplication) -> bool:
    try:
        scheme = app.styleHints().colorScheme()
        if scheme == Qt.ColorScheme.Dark:
            return True
        if scheme == Qt.ColorScheme.Light:
            return False
    except AttributeError:
        pass
    window = app.palette().color(QPalette.ColorRole.Window)
    return window.lightness() < 128


def apply_theme(app: QApplication, dark: bool | None = None) -> str:
    """Apply the light or dark style sheet; returns the name applied."""
    dark = system_is_dark(app) if dark is None else dark
    name = "dark" if dark else "light"
    try:
        app.setStyleSheet(resource(f"{name}.qss").read_text(encoding="utf-8"))
    except OSError:
        app.setStyleSheet("")
    app.setProperty("llambda_theme", name)
    return name


def follow_system_theme(app: QApplication) -> None:
    apply_theme(app)
    try:
        app.styleHints().colorSchemeChanged.connect(lambda _scheme: _on_scheme_changed(app))
    except AttributeError:
        pass


def _on_scheme_changed(app: QApplication) -> None:
    if (app.property("llambda_theme_choice") or "system") == "system":
        apply_theme(app)


def set_theme_choice(app: QApplication, choice: str) -> str:
    """ "system" (follow the desktop), "light" or "dark"; returns the theme applied."""
    choice = choice if choice in ("system", "light", "dark") else "system"
    app.setProperty("llambda_theme_choice", choice)
    return apply_theme(app, None if choice == "system" else choice == "dark")


def app_icon() -> QIcon:
    return QIcon(str(resource("icons/llambda.svg")))


__all__ = ["apply_theme", "follow_system_theme", "set_theme_choice", "system_is_dark", "app_icon", "resource"]
