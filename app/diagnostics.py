"""What Llambda can say about itself: versions (`llambda --version --verbose`, Help → About), a
diagnostics report to paste into a bug report (Help → Copy diagnostics), and `llambda doctor`'s
checks, each problem in one plain line.

No Qt here (the window calls these functions). Every fact is gathered defensively: a fact that
cannot be read says so in its value and never stops the report. The report is redacted: the home
folder becomes `~`, the user's name `<user>`, and conversation text (the "llambda.text" log
lines, present only when "log prompts" is on) is removed.
"""

from __future__ import annotations

import functools
import getpass
import importlib.util
import json
import os
import platform
import re
import shutil
import sqlite3
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence, TextIO

from app import __version__, logs
from app.logs import TEXT_LOGGER, log_path, native_crash_reports
from app.paths import chats_db_path, data_dir, log_dir, models_dir

REPO_ROOT = Path(__file__).resolve().parent.parent
BUILD_INFO = Path(__file__).resolve().parent / "_build_info.json"  # written by build.spec
LOG_TAIL = 200
ISA_CPU_FLAGS = {"avx2": ("avx2", "fma", "f16c"), "avx512": ("avx512f", "avx512bw", "avx512vl", "avx512dq")}


# -- versions -------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=1)
def git_revision() -> str:
    """The revision this code came from, and where that fact comes from: recorded at build time
    (the bundle), or read now from the git checkout the code runs from."""
    rec = _build_info().get("revision")
    if rec:
        return f"{rec} (recorded at build time)"
    if (REPO_ROOT / ".git").exists():
        try:
            rev = subprocess.run(
                ["git", "-C", str(REPO_ROOT), "rev-parse", "--short=12", "HEAD"],
                capture_output=True,
                text=True,
                timeout=5,
            )
            if rev.returncode == 0 and rev.stdout.strip():
                dirty = subprocess.run(
                    ["git", "-C", str(REPO_ROOT), "status", "--porcelain", "--untracked-files=no"],
                    capture_output=True,
                    text=True,
                    timeout=5,
                )
                note = ", with local changes" if dirty.returncode == 0 and dirty.stdout.strip() else ""
                return f"{rev.stdout.strip()} (read from the git checkout{note})"
        except (OSError, subprocess.SubprocessError):
            pass
    return "unknown (not a git checkout, and none recorded at build time)"


def _build_info() -> dict:
    """What the bundle's build recorded ({} when running from a checkout or an install)."""
    try:
        d = json.loads(BUILD_INFO.read_text(encoding="utf-8"))
        return d if isinstance(d, dict) else {}
    except (OSError, ValueError):
        return {}


def _module_version(name: str) -> str:
    try:
        from importlib.metadata import version  # lazy: ~50 ms; `llambda --version` loads this module

        dist = {"PySide6": "PySide6-Essentials"}.get(name, name)
        try:
            return version(dist)
        except Exception:
            mod = __import__(name)
            return str(getattr(mod, "__version__", "installed, version unknown"))
    except Exception:
        return "not installed"


def cpu_flags() -> set[str]:
    """The CPU's feature flags (Linux: /proc/cpuinfo; elsewhere empty)."""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def isa_reason() -> str:
    """Which kernel level runs and why: forced by LLAMBDA_ISA, or the best the CPU's flags allow."""
    try:
        from app.kernels import ISA_NAMES, best_isa_level, isa_level, isa_name  # lazy: a broken install has none
    except ImportError as e:
        return f"kernel library not built ({e})"
    flags = cpu_flags()
    seen = " ".join(f for names in ISA_CPU_FLAGS.values() for f in names if f in flags)
    missing = [f for names in ISA_CPU_FLAGS.values() for f in names if f not in flags]
    best = ISA_NAMES[best_isa_level()] if best_isa_level() < len(ISA_NAMES) else str(best_isa_level())
    why = f"CPU flags: {seen or 'none of avx2/avx512'}" + (
        f"; missing {' '.join(missing)}" if missing and flags else ""
    )
    if isa_level() != best_isa_level():
        return (
            f"{isa_name()} (forced by LLAMBDA_ISA={os.environ.get('LLAMBDA_ISA', '?')}; the CPU allows {best}; {why})"
        )
    return f"{isa_name()} (the best this CPU allows; {why})"


@functools.lru_cache(maxsize=1)
def kernel_library() -> str:
    """Library version, the compiler that built it and the flags it was built with."""
    try:
        from app import _llk, kernels  # lazy: a broken install has none
    except ImportError as e:
        return f"not built ({e})"
    so = Path(_llk.__file__)
    compiler = "compiler unknown"
    try:
        m = re.search(rb"GCC: \([^)]{0,80}\) [0-9][0-9.]*|clang version [0-9][0-9.]*", so.read_bytes())
        if m:
            compiler = m.group(0).decode("ascii", "replace")
    except OSError:
        pass
    return f"{kernels.version()}, {so.name} ({so.stat().st_size / 2**20:.1f} MiB), {compiler}; {_kernel_flags()}"


def _kernel_flags() -> str:
    """The compiler flags of the kernels: recorded by the bundle's build, or read from
    kernels/build_ffi.py of the checkout (the library itself does not carry them)."""
    if _build_info().get("kernel_flags"):
        return f"{_build_info()['kernel_flags']} (recorded at build time)"
    spec = REPO_ROOT / "kernels" / "build_ffi.py"
    if not spec.exists():
        return "flags not recorded in this build"
    try:
        loader = importlib.util.spec_from_file_location("_llambda_build_ffi", spec)
        mod = importlib.util.module_from_spec(loader)  # type: ignore[arg-type]  # None: caught below
        loader.loader.exec_module(mod)  # type: ignore[union-attr]  # None: caught below
        return (
            "common "
            + " ".join(mod.GCC_COMMON)
            + "; per level: avx2 "
            + " ".join(mod._GCC_AVX2)
            + ", avx512 "
            + " ".join(mod._GCC_AVX512)
            + " (from kernels/build_ffi.py)"
        )
    except Exception as e:
        return f"flags unknown ({type(e).__name__}: {e})"


def qt_version() -> str:
    try:
        import PySide6  # lazy: heavy, and no Qt below app.ui
        from PySide6.QtCore import qVersion

        return f"PySide6 {PySide6.__version__}, Qt {qVersion()}"
    except Exception as e:
        return f"not available ({type(e).__name__})"


def os_description() -> str:
    try:
        rel = platform.freedesktop_os_release().get("PRETTY_NAME", "")
    except (OSError, AttributeError):
        rel = ""
    return f"{platform.system()} {platform.release()} {platform.machine()}" + (f" ({rel})" if rel else "")


def versions() -> list[tuple[str, str]]:
    """(what, version) pairs, the app first."""
    return [
        ("Llambda", __version__),
        ("git revision", git_revision()),
        ("kernel library", kernel_library()),
        ("kernels in use", isa_reason()),
        ("Python", f"{platform.python_version()} ({platform.python_implementation()}, {sys.executable})"),
        ("Qt", qt_version()),
        ("numpy", _module_version("numpy")),
        ("tokenizers", _module_version("tokenizers")),
        ("sentencepiece", _module_version("sentencepiece")),
        ("jinja2", _module_version("jinja2")),
        ("OS", os_description()),
    ]


def kernels_description() -> str:
    """`app.kernels.isa_description()`, or what to do when the kernel library is not built."""
    try:
        from app.kernels import isa_description  # lazy: numpy and the compiled library; a broken install has none
    except ImportError:
        return "not built (reinstall Llambda)"
    return isa_description()


def version_line() -> str:
    """`llambda --version` and the first line of the About box."""
    return f"llambda {__version__} (kernels: {kernels_description()})"


def version_report() -> str:
    """`llambda --version --verbose` and the About box: one line per component."""
    rows = versions()
    width = max(len(k) for k, _ in rows)
    return redact("\n".join(f"{k:<{width}}  {v}" for k, v in rows))


# -- machine and folders --------------------------------------------------------------------------


def _free_space(path: Path) -> str:
    p = path
    while not p.exists() and p.parent != p:
        p = p.parent
    try:
        du = shutil.disk_usage(p)
        return f"{du.free / 2**30:.1f} GiB free of {du.total / 2**30:.1f} GiB"
    except OSError as e:
        return f"free space unknown ({e.strerror or e})"


def _folder_size(path: Path) -> tuple[int, int]:
    total = n = 0
    try:
        for p in path.glob("*.gguf"):
            try:
                total += p.stat().st_size
                n += 1
            except OSError:
                pass
    except OSError:
        pass
    return n, total


def machine() -> list[tuple[str, str]]:
    rows = [("CPU", cpu_model())]
    try:
        from app.kernels import cpu_count_allowed, cpu_count_physical  # lazy: a broken install has none

        rows.append(("cores", f"{cpu_count_physical()} physical, {cpu_count_allowed()} usable CPUs"))
    except ImportError:
        rows.append(("cores", f"{os.cpu_count()} CPUs"))
    try:
        import psutil  # lazy: slow to import; `llambda --version` loads this module

        vm = psutil.virtual_memory()
        rows.append(("memory", f"{vm.total / 2**30:.1f} GiB, {vm.available / 2**30:.1f} GiB available"))
    except Exception as e:
        rows.append(("memory", f"unknown ({type(e).__name__})"))
    return rows


def folders() -> list[tuple[str, Path]]:
    return [("models", models_dir()), ("data", data_dir()), ("logs", log_dir()), ("database", chats_db_path())]


def paths_report() -> list[tuple[str, str]]:
    rows = []
    for name, p in folders():
        state = "" if p.exists() else " (not created yet)"
        rows.append((name, f"{p}{state}; {_free_space(p)}"))
    n, total = _folder_size(models_dir())
    rows.append(("library", f"{n} model file{'s' if n != 1 else ''}, {total / 2**20:.1f} MiB"))
    return rows


# -- redaction and the log tail -------------------------------------------------------------------

TEXT_REMOVED = "[conversation text removed]"


def redact(text: str) -> str:
    """The home folder becomes `~` and the user's name `<user>`; log lines of conversation text
    (logger "llambda.text") are replaced by a marker."""
    out = []
    for line in text.splitlines():
        if f" {TEXT_LOGGER}:" in line:
            line = line.split(f" {TEXT_LOGGER}:", 1)[0] + f" {TEXT_LOGGER}: {TEXT_REMOVED}"
        out.append(line)
    text = "\n".join(out) + ("\n" if text.endswith("\n") else "")
    home = os.path.expanduser("~")
    if home and home not in ("/", "~"):
        text = text.replace(home, "~")
    try:
        user = getpass.getuser()
    except Exception:
        user = ""
    if user and len(user) >= 3 and user != "root":
        text = re.sub(rf"(?<![\w.-]){re.escape(user)}(?![\w-])", "<user>", text)
    return text


def log_tail(n: int = LOG_TAIL) -> list[str]:
    """The last n lines of the stage log (the rotated file before it when the current is short)."""
    path = log_path()
    lines: list[str] = []
    for p in (path.with_name(path.name + ".1"), path):
        try:
            lines += p.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            pass
    return lines[-n:]


def crash_reports() -> list[Path]:
    """Saved crash reports (Python's and native ones), oldest first."""
    folder = log_path().parent
    try:
        py = sorted(folder.glob("crash-*.txt"))
    except OSError:
        py = []
    return sorted(py + native_crash_reports(folder), key=lambda p: p.stat().st_mtime if p.exists() else 0)


def diagnostics_text(tail: int = LOG_TAIL) -> str:
    """The whole report for a bug report: versions, machine, folders, crash reports, the log's
    last lines; redacted."""

    def table(title: str, rows: Sequence[tuple[str, object]]) -> list[str]:
        width = max((len(k) for k, _ in rows), default=0)
        return [f"## {title}"] + [f"{k:<{width}}  {v}" for k, v in rows] + [""]

    parts = ["# Llambda diagnostics", ""]
    parts += table("versions", versions())
    parts += table("machine", machine())
    parts += table("folders", paths_report())
    reports = crash_reports()
    parts += [f"## crash reports ({len(reports)})"] + [str(p) for p in reports[-10:]] + [""]
    lines = log_tail(tail)
    parts += [f"## the log's last {len(lines)} lines"] + lines
    return redact("\n".join(parts) + "\n")


# -- doctor ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    message: str  # one plain line: what was found (a problem says what is wrong)


def check_writable(name: str, folder: Path) -> Check:
    """Can Llambda create this folder and write a file in it?"""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe = folder / f".llambda-doctor-{os.getpid()}"
        probe.write_bytes(b"ok")
        probe.unlink()
    except OSError as e:
        return Check(f"{name} folder", False, f"the {name} folder {folder} cannot be written: {e.strerror or e}")
    return Check(f"{name} folder", True, f"{folder} is writable")


def check_database(path: Path) -> Check:
    """SQLite's quick_check on the conversation database, opened read-only."""
    if not path.exists():
        return Check("database", True, f"{path} does not exist yet (created on first use)")
    try:
        conn = sqlite3.connect(f"{Path(path).absolute().as_uri()}?mode=ro", uri=True, timeout=5)
        try:
            rows = [r[0] for r in conn.execute("PRAGMA quick_check").fetchall()]
        finally:
            conn.close()
    except sqlite3.DatabaseError as e:
        return Check(
            "database",
            False,
            f"the conversation database {path} is damaged or not a "
            f"database ({e}); the window keeps it unchanged under a dated name beside it "
            "and starts a new one the next time it opens",
        )
    except sqlite3.Error as e:
        return Check("database", False, f"the conversation database {path} cannot be read: {e}")
    bad = [r for r in rows if r != "ok"]
    if bad:
        return Check(
            "database",
            False,
            f"the conversation database {path} is damaged: {bad[0]}"
            + (f" (and {len(bad) - 1} more problems)" if len(bad) > 1 else ""),
        )
    return Check("database", True, f"{path}: quick_check ok")


def check_kernels(n_cols: int = 256, n_rows: int = 16) -> Check:
    """Every tensor type's matrix kernels at the level in use against the reference level, on
    random weights and activations: the two must agree bit for bit (single token and batch)."""
    try:
        import numpy as np  # lazy: with the kernels; a broken install has none

        from app import kernels as K
    except ImportError as e:
        return Check("kernels", False, f"the kernel library cannot be loaded: {e}")
    level = K.isa_level()
    bad = []
    for t in sorted(K.SUPPORTED_TYPES):
        try:
            w = K.random_weights(t, n_rows, n_cols, seed=t)
            x = np.random.default_rng(1000 + t).standard_normal((3, n_cols), dtype=np.float32)
            same = np.array_equal(
                K.matmul(None, t, w, n_cols, x, isa="ref"), K.matmul(None, t, w, n_cols, x, isa=level), equal_nan=True
            ) and np.array_equal(
                K.matvec(None, t, w, n_cols, x[0], isa="ref"),
                K.matvec(None, t, w, n_cols, x[0], isa=level),
                equal_nan=True,
            )
        except Exception as e:
            bad.append(f"{K.TYPE_NAMES.get(t, t)} ({e})")
            continue
        if not same:
            bad.append(K.TYPE_NAMES.get(t, str(t)))
    if bad:
        return Check(
            "kernels",
            False,
            f"the {K.isa_name()} kernels disagree with the reference for "
            f"{', '.join(bad)}: replies may be wrong; try LLAMBDA_ISA=ref and report this",
        )
    return Check("kernels", True, f"{K.isa_name()} matches the reference on {len(K.SUPPORTED_TYPES)} tensor types")


def doctor_checks() -> list[Check]:
    return [
        check_writable("data", data_dir()),
        check_writable("models", models_dir()),
        check_writable("logs", log_dir()),
        check_database(chats_db_path()),
        check_kernels(),
    ]


def run_doctor(out: TextIO | None = None, err: TextIO | None = None, verbose: bool = False) -> int:
    """`llambda doctor`: the facts, then each check; problems one line each on stderr.
    Returns 0 when all is clear, 1 otherwise."""
    out = out or sys.stdout
    err = err or sys.stderr
    facts = versions()[:4] + machine() + paths_report()
    width = max(len(k) for k, _ in facts)
    out.write(redact("".join(f"{k:<{width}}  {v}\n" for k, v in facts)))
    checks = doctor_checks()
    for c in checks:
        if c.ok and verbose:
            out.write(redact(f"ok: {c.name}: {c.message}\n"))
    problems = [c for c in checks if not c.ok]
    for c in problems:
        err.write(redact(f"problem: {c.message}\n"))
    log = logs.get("doctor")
    for c in problems:
        log.warning("doctor: %s", c.message, extra={"file_only": True})
    if problems:
        out.write(f"{len(problems)} problem{'s' if len(problems) != 1 else ''} found.\n")
        return 1
    out.write(f"All clear ({len(checks)} checks).\n")
    log.info("doctor: all clear (%d checks)", len(checks))
    return 0


__all__ = [
    "versions",
    "version_report",
    "git_revision",
    "isa_reason",
    "kernel_library",
    "machine",
    "paths_report",
    "redact",
    "log_tail",
    "crash_reports",
    "diagnostics_text",
    "Check",
    "doctor_checks",
    "run_doctor",
    "check_writable",
    "check_database",
    "check_kernels",
]
