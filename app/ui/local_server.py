"""The main window's local server: File → Serve on localhost (OpenAI API) and the serve bar in
the status bar, kept in step. MainWindow composes one `LocalServer`; the bar itself (the switch,
the port, the address, the request count) and the server it runs are `app/ui/serve_bar.py`.

The bar is hidden until the menu item shows it, so it takes no room from the figures; hiding it
stops the server. Starting the server from the bar itself (or a test) shows the bar and ticks the
menu item.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from app.ui.serve_bar import ServeBar

if TYPE_CHECKING:
    from PySide6.QtGui import QAction
    from PySide6.QtWidgets import QMainWindow

    from app.ui.worker import EngineWorker


class LocalServer:
    """The serve bar in `window`'s status bar, sharing `worker`'s engine, and the menu's `action`
    (made checkable here) that shows and hides it."""

    def __init__(self, window: QMainWindow, worker: EngineWorker, action: QAction) -> None:
        self.action = action
        self.bar = ServeBar(worker, window)  # the local server, sharing this engine
        window.statusBar().addPermanentWidget(self.bar)
        self.bar.hide()  # File > Serve on localhost shows it
        action.setCheckable(True)
        action.triggered.connect(self.on_action_triggered)
        self.bar.serving_changed.connect(self.on_bar_serving_changed)

    def on_action_triggered(self, on: bool) -> None:
        """File > Serve on localhost: the server's switch, port and address in the status bar
        (hidden otherwise, so they take no room from the figures); hiding it stops the server."""
        if not on and self.bar.switch.isChecked():
            self.bar.switch.setChecked(False)
        self.bar.setVisible(on)

    def on_bar_serving_changed(self, serving: bool) -> None:
        if serving:  # started from the bar itself (or a test): keep it and the menu in step
            self.bar.show()
            self.action.setChecked(True)

    def stop(self) -> None:
        """Stop the server, if it runs (the window closing). Safe to call twice."""
        self.bar.stop()


__all__ = ["LocalServer"]
