"""Where the data files shipped with Llambda are: style sheets, icons, the self-test model.

A wheel carries them inside the package (`app/resources/`, copied there by setup.py's build_py);
the source tree and the frozen bundle keep them in `resources/` beside the `app` package. The
first folder that exists wins.
"""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent


def resources_dir() -> Path:
    """The folder of shipped data files (it may be missing in a broken build; callers say so)."""
    inside = _PACKAGE / "resources"
    if inside.is_dir():
        return inside
    return _PACKAGE.parent / "resources"


def resource(name: str) -> Path:
    return resources_dir() / name


__all__ = ["resources_dir", "resource"]
