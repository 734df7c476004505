"""The desktop window (PySide6): state, worker, views."""
