#!/usr/bin/env python3
"""Llambda against llama.cpp on the real-shape benchmark models, one table from one run.

    python scripts/bench_shapes.py [--models llama3.2-1b,...] [--types Q4_0,Q4_K_M,...]
        [--isa avx2,avx2-vnni,avx512] [--threads 2] [--rounds 3] [--pp 512] [--tg 128] [--depth 4096]
        [--ours-root DIR] [--out table.md] [--json]

For each model x type x ISA level found (files from scripts/make_bench_models.py, llama.cpp
builds from scripts/build_llamacpp.sh, both under $LLAMBDA_BENCH_CACHE), `llambda bench` of the
checkout at --ours-root (python -m app.engine.cli bench, with LLAMBDA_ISA set to the level) and
`llama-bench` of the llama.cpp build for that level (avx2 -> the avx2 build, our AVX2 level without
AVX-VNNI; avx2-vnni -> the avxvnni build, our AVX2 level with it; avx512 -> the avx512 build:
AVX-512 without AMX, or the native build where no avx512 build exists or with --native, which on an
AMX CPU multiplies prompts on the AMX tiles) run alternately, `--rounds` times each, with the same
thread count: each round of either
is one warm-up run and one timed run of ppN and of tgN; the table shows the medians over the
rounds, so that both engines see the same machine load. Columns:

  pp / tg        tokens/s, ours and llama.cpp, and the ratio ours / llama.cpp
  pp@dD, tg@dD   prompt processing and generation with D tokens already in the KV cache (--depth,
                 llama-bench -d)
  tg % roofline  tg tokens/s over the roofline: read bandwidth (the kernel library's probe, same
                 thread count, measured beside each row) / weight bytes read per generated token
                 (every tensor but the embedding table; the table too when the output is tied)
  pp GFLOP/s     2 x weights each prompt token is multiplied by (the layers' matrices) x pp tok/s
  pp % of peak   pp GFLOP/s over the level's integer peak in GOP/s: its widest 8-bit multiply-add
                 instruction alone on the same threads (the kernel library's probe, int8_peak())
  load           seconds from opening the file to the first token out, file in the page cache
  RSS            peak resident memory of a `llambda generate` process (prompt + 16 tokens)

A model that fails (missing file or build, a crash, bad output) is one line in the table saying
why; the run goes on.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from scripts.make_bench_models import (  # noqa: E402 (after the sys.path line above)
    DEFAULT_SHAPES,
    LLAMACPP_VERSION,
    SHAPES,
    TYPES,
    bench_cache,
    model_path,
)

FLOPS_NOTE = (
    "pp GFLOP/s = 2 x (weights every prompt token is multiplied by: the layers' matrices) "
    "x tokens/s; the output matrix (last token only) and attention are not counted"
)
ISA_LEVELS = ("avx2", "avx2-vnni", "avx512")
LLAMACPP_BUILD = {"avx2": "avx2", "avx2-vnni": "avxvnni", "avx512": "avx512"}
# LLAMBDA_ISA per level: avx2 is AVX2 alone (on a CPU with AVX-VNNI as on one without it, so that it
# meets llama.cpp's avx2 build like for like); avx2-vnni is the AVX2 level with AVX-VNNI
OURS_ISA = {"avx2": "avx2-novnni", "avx2-vnni": "avx2", "avx512": "avx512"}
DEFAULT_TYPES = ("Q4_0", "Q4_K_M", "Q8_0")


def _csv(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--models",
        type=_csv,
        default=list(DEFAULT_SHAPES),
        help=f"shapes, comma-separated (default {','.join(DEFAULT_SHAPES)}); a path to a .gguf file is taken as is, once (--types does not apply)",
    )
    ap.add_argument(
        "--types",
        type=_csv,
        default=list(DEFAULT_TYPES),
        help=f"comma-separated, of {','.join(TYPES)} (default {','.join(DEFAULT_TYPES)})",
    )
    ap.add_argument(
        "--isa",
        type=_csv,
        default=None,
        help="levels to compare, of avx2,avx2-vnni,avx512 (default: every level this CPU has)",
    )
    ap.add_argument("--threads", type=int, default=2, help="threads for both engines (default 2)")
    ap.add_argument("--rounds", type=int, default=3, help="alternating rounds per engine (median)")
    ap.add_argument("--pp", type=int, default=512)
    ap.add_argument("--tg", type=int, default=128)
    ap.add_argument("--depth", type=int, default=0, help="also pp and tg at this depth (llama-bench -d)")
    ap.add_argument(
        "--ours-root",
        type=Path,
        default=ROOT,
        help="the Llambda checkout to run (its app/_llk must be built); default this one",
    )
    ap.add_argument("--python", default=sys.executable, help="interpreter for --ours-root")
    ap.add_argument(
        "--llamacpp-dir",
        type=Path,
        default=None,
        help=f"folder with the native/, avx2/, avxvnni/ and avx512/ builds (default $LLAMBDA_BENCH_CACHE/llama.cpp/{LLAMACPP_VERSION})",
    )
    ap.add_argument(
        "--native",
        action="store_true",
        help="llama.cpp's native build against our avx512 level (with AMX where the CPU has it)",
    )
    ap.add_argument(
        "--llama-python",
        default=None,
        help="instead of llama-bench: run llama.cpp through llama-cpp-python in this "
        "interpreter (pip's build of it: native), driven like llama-bench",
    )
    ap.add_argument("--no-load", action="store_true", help="skip the load time and RSS columns")
    ap.add_argument("--timeout", type=float, default=1800, help="seconds before a run counts as failed")
    ap.add_argument("--out", type=Path, default=None, help="also write the markdown table here")
    ap.add_argument("--json", action="store_true", help="print the rows as JSON instead of the table")
    a = ap.parse_args(argv)
    for t in a.types:
        if t not in TYPES:
            ap.error(f"unknown type {t!r}; known: {', '.join(TYPES)}")
    for m in a.models:
        if m not in SHAPES and not m.endswith(".gguf"):
            ap.error(f"unknown model {m!r}; known: {', '.join(SHAPES)} (or a .gguf path)")
    if a.isa is not None:
        for i in a.isa:
            if i not in ISA_LEVELS:
                ap.error(f"unknown ISA level {i!r}; known: {', '.join(ISA_LEVELS)}")
    for name in ("threads", "rounds", "pp", "tg"):
        if getattr(a, name) < 1:
            ap.error(f"--{name} must be at least 1")
    if a.depth < 0:
        ap.error("--depth must be >= 0")
    a.ours_root = a.ours_root.resolve()
    if not (a.ours_root / "app" / "engine" / "cli.py").exists():
        ap.error(f"--ours-root {a.ours_root}: not a Llambda checkout (no app/engine/cli.py)")
    return a


def cpu_flags() -> set[str]:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform

    return platform.processor() or "unknown CPU"


def available_levels(flags: set[str] | None = None) -> list[str]:
    flags = cpu_flags() if flags is None else flags
    levels = []
    if {"avx2", "fma"} <= flags:
        levels.append("avx2")
        if "avx_vnni" in flags:
            levels.append("avx2-vnni")
    if {"avx512f", "avx512bw", "avx512vl"} <= flags:
        levels.append("avx512")
    return levels


class Failed(Exception):
    pass


def _run(cmd: list[str], cwd: Path | None = None, env: dict | None = None, timeout: float = 1800) -> str:
    try:
        r = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise Failed(f"{Path(cmd[0]).name} timed out after {timeout:.0f} s") from None
    except OSError as e:
        raise Failed(f"{cmd[0]}: {e.strerror}") from None
    if r.returncode != 0:
        tail = (r.stderr or r.stdout).strip().splitlines()
        raise Failed(f"{Path(cmd[0]).name} exit {r.returncode}: {tail[-1] if tail else 'no output'}")
    return r.stdout


def _last_json(out: str):
    for line in reversed(out.strip().splitlines()):
        line = line.strip()
        if line.startswith(("[", "{")):
            return json.loads(line)
    raise Failed("no JSON in the output")


def ours_env(isa: str) -> dict:
    env = dict(os.environ)
    env["LLAMBDA_ISA"] = OURS_ISA[isa]
    return env


def run_ours(a, model: Path, isa: str, depth: int) -> dict[str, float]:
    """{"pp": tok/s, "tg": tok/s, "tg_waited": share} of one `llambda bench` run (one warm-up, one
    timed); tg_waited: the share of the generation its driving thread waited on stalled threads."""
    cmd = [
        a.python,
        "-m",
        "app.engine.cli",
        "bench",
        str(model),
        "--threads",
        str(a.threads),
        "--pp",
        str(a.pp),
        "--tg",
        str(a.tg),
        "--reps",
        "1",
        "--json",
    ]
    if depth:
        cmd += ["--depth", str(depth)]
    rows = _last_json(_run(cmd, cwd=a.ours_root, env=ours_env(isa), timeout=a.timeout))
    out = {}
    for r in rows:
        if r.get("isa") and r["isa"] != isa and not r["isa"].startswith(isa):
            raise Failed(f"ours ran {r['isa']}, not {isa}")
        out[r["test"][:2]] = float(r["tok_s"])
        if r["test"].startswith("tg") and "waited" in r:
            out["tg_waited"] = float(r["waited"])
    return out


def run_llamacpp(a, binary: Path, model: Path, depth: int) -> dict[str, float]:
    cmd = [
        str(binary),
        "-m",
        str(model),
        "-t",
        str(a.threads),
        "-p",
        str(a.pp),
        "-n",
        str(a.tg),
        "-r",
        "1",
        "-o",
        "json",
    ]
    if depth:
        cmd += ["-d", str(depth)]
    rows = _last_json_array(_run(cmd, timeout=a.timeout))
    out = {}
    for r in rows:
        kind = "pp" if r.get("n_prompt", 0) and not r.get("n_gen", 0) else "tg"
        out[kind] = float(r["avg_ts"])
    return out


def run_llamacpp_py(a, model: Path, depth: int) -> dict[str, float]:
    from scripts.bench_vs_llamacpp import LLAMA_BENCH

    rows = _last_json(
        _run(
            [a.llama_python, "-c", LLAMA_BENCH, str(model), str(a.threads), str(a.pp), str(a.tg), "1", str(depth)],
            timeout=a.timeout,
        )
    )
    return {r["test"][:2]: float(r["tok_s"]) for r in rows}


def _last_json_array(out: str):
    start = out.find("[")
    if start < 0:
        raise Failed("llama-bench printed no JSON")
    try:
        return json.loads(out[start:])
    except ValueError:
        raise Failed("llama-bench printed bad JSON") from None


PROBE = r"""
import json, sys
from app import kernels
from app.gguf import open_gguf
from app.model import config_from_gguf
path, nt = sys.argv[1], int(sys.argv[2])
with open_gguf(path) as f:
    cfg = config_from_gguf(f)
    per_token = sum(t.n_bytes for n, t in f.tensors.items() if n != "token_embd.weight")
    if cfg.tied_output:
        per_token += f.tensors["token_embd.weight"].n_bytes
    layer_params = sum(t.n_elements for n, t in f.tensors.items()
                       if n.startswith("blk.") and n.endswith(".weight") and len(t.shape) == 2)
    size = sum(t.n_bytes for t in f.tensors.values())
with kernels.ThreadPool(nt) as pool:
    bw = kernels.read_bandwidth(pool)
    peak = kernels.int8_peak(pool)
print(json.dumps({"bytes_per_token": per_token, "layer_params": layer_params, "bandwidth": bw,
                  "weights_bytes": size, "int8_peak": peak}))
"""

LOAD = r"""
import json, sys, time
from app.engine.engine import Engine
from app.engine.generate import Finished, GenerationRequest
path, nt = sys.argv[1], int(sys.argv[2])
t = time.perf_counter()
with Engine(path, n_ctx=256, n_threads=nt) as eng:
    ids = eng.raw_prompt("Hello")
    for ev in eng.generate(GenerationRequest(tuple(ids), max_tokens=1, stop_on_eog=False)):
        if isinstance(ev, Finished):
            break
    print(json.dumps({"load_s": time.perf_counter() - t}))
"""


def probe(a, model: Path, isa: str) -> dict:
    return _last_json(
        _run([a.python, "-c", PROBE, str(model), str(a.threads)], cwd=a.ours_root, env=ours_env(isa), timeout=a.timeout)
    )


def page_in(model: Path) -> None:
    with open(model, "rb") as f:
        while f.read(16 << 20):
            pass


def load_and_rss(a, model: Path, isa: str) -> tuple[float, float]:
    """(seconds to the first token with the file cached, peak RSS bytes of `llambda generate`)."""
    page_in(model)
    loads = [
        _last_json(
            _run(
                [a.python, "-c", LOAD, str(model), str(a.threads)],
                cwd=a.ours_root,
                env=ours_env(isa),
                timeout=a.timeout,
            )
        )["load_s"]
        for _ in range(2)
    ]
    gen = _last_json(
        _run(
            [
                a.python,
                "-m",
                "app.engine.cli",
                "generate",
                str(model),
                "--raw",
                "--prompt",
                "The quick brown fox jumps over the lazy dog.",
                "--max-tokens",
                "16",
                "--temperature",
                "0",
                "--ctx",
                "512",
                "--threads",
                str(a.threads),
                "--json",
            ],
            cwd=a.ours_root,
            env=ours_env(isa),
            timeout=a.timeout,
        )
    )
    return min(loads), float(gen["stats"]["peak_rss_bytes"])


def model_file(name: str, qtype: str) -> Path:
    return Path(name) if name.endswith(".gguf") else model_path(name, qtype)


def bench_one(a, name: str, qtype: str, isa: str, llama_bench: Path) -> dict:
    model = model_file(name, qtype)
    row = {"model": name if not name.endswith(".gguf") else model.name, "type": qtype, "isa": isa, "threads": a.threads}
    try:
        if not model.exists():
            raise Failed(f"{model} missing (scripts/make_bench_models.py)")
        row["file_bytes"] = model.stat().st_size
        if not a.llama_python and not llama_bench.exists():
            raise Failed(f"{llama_bench} missing (scripts/build_llamacpp.sh)")
        page_in(model)

        def llamacpp(model, depth):
            if a.llama_python:
                return run_llamacpp_py(a, model, depth)
            return run_llamacpp(a, llama_bench, model, depth)

        ours, theirs = {"pp": [], "tg": [], "tg_waited": []}, {"pp": [], "tg": []}
        deep_ours, deep_theirs = {"pp": [], "tg": [], "tg_waited": []}, {"pp": [], "tg": []}
        for _ in range(a.rounds):
            for k, v in run_ours(a, model, isa, 0).items():
                ours[k].append(v)
            for k, v in llamacpp(model, 0).items():
                theirs[k].append(v)
            if a.depth:
                for k, v in run_ours(a, model, isa, a.depth).items():
                    deep_ours[k].append(v)
                for k, v in llamacpp(model, a.depth).items():
                    deep_theirs[k].append(v)
        _medians(row, ours, theirs, "", "")
        if ours["tg_waited"]:
            row["tg_waited"] = statistics.median(ours["tg_waited"])
        if a.depth:
            row["depth"] = a.depth
            _medians(row, deep_ours, deep_theirs, "d", f" at depth {a.depth}")
        p = probe(a, model, isa)
        row["bandwidth"] = p["bandwidth"]
        row["bytes_per_token"] = p["bytes_per_token"]
        row["roofline_tok_s"] = p["bandwidth"] / p["bytes_per_token"]
        row["tg_of_roofline"] = row["tg_ours"] / row["roofline_tok_s"]
        row["llamacpp_tg_of_roofline"] = row["tg_llamacpp"] / row["roofline_tok_s"]
        row["pp_gflops"] = 2 * p["layer_params"] * row["pp_ours"] / 1e9
        row["llamacpp_pp_gflops"] = 2 * p["layer_params"] * row["pp_llamacpp"] / 1e9
        row["int8_peak_gops"] = p["int8_peak"] / 1e9
        if not a.no_load:
            row["load_s"], row["peak_rss"] = load_and_rss(a, model, isa)
    except Failed as e:
        row["error"] = str(e)
    except (ValueError, KeyError, TypeError) as e:
        row["error"] = f"unexpected output: {type(e).__name__}: {e}"
    return row


def _medians(row: dict, ours: dict, theirs: dict, tag: str, where: str) -> None:
    """row[pp{tag}_ours], _llamacpp and _ratio (and tg's) from the rounds' figures."""
    for k in ("pp", "tg"):
        if not ours[k] or not theirs[k]:
            raise Failed(f"no {k} result{where}")
        row[f"{k}{tag}_ours"] = statistics.median(ours[k])
        row[f"{k}{tag}_llamacpp"] = statistics.median(theirs[k])
        row[f"{k}{tag}_ratio"] = row[f"{k}{tag}_ours"] / row[f"{k}{tag}_llamacpp"]


def _of_peak(r: dict) -> str:
    """pp GFLOP/s over the level's int8 peak, ours (llama.cpp's), and the peak itself."""
    peak = r.get("int8_peak_gops") or 0.0
    if peak <= 0:
        return "—"
    return f"{100 * r['pp_gflops'] / peak:.0f}% ({100 * r['llamacpp_pp_gflops'] / peak:.0f}%) of {peak:.0f}"


def _f(v, fmt: str) -> str:
    return "—" if v is None else format(v, fmt)


def table(rows: list[dict], a) -> str:
    depth = a.depth > 0
    head = ["model", "type", "ISA", "file", f"pp{a.pp} ours / llama.cpp", f"tg{a.tg} ours / llama.cpp"]
    if depth:
        head += [f"pp{a.pp}@d{a.depth} ours / llama.cpp", f"tg{a.tg}@d{a.depth} ours / llama.cpp"]
    head += ["tg % of roofline (llama.cpp)", "pp GFLOP/s (llama.cpp)", "pp % of int8 peak (llama.cpp)", "load"]
    head += ["peak RSS"]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for r in rows:
        size = f"{r['file_bytes'] / 1e9:.2f} GB" if "file_bytes" in r else "—"
        if "error" in r:
            cells = [r["model"], r["type"], r["isa"], size, f"failed: {r['error']}"]
            cells += [""] * (len(head) - len(cells))
        else:
            cells = [
                r["model"],
                r["type"],
                r["isa"],
                size,
                f"{r['pp_ours']:.1f} / {r['pp_llamacpp']:.1f} = {r['pp_ratio']:.2f}×",
                f"{r['tg_ours']:.1f} / {r['tg_llamacpp']:.1f} = {r['tg_ratio']:.2f}×",
            ]
            if depth:
                cells += [
                    f"{r[k + 'd_ours']:.1f} / {r[k + 'd_llamacpp']:.1f} = {r[k + 'd_ratio']:.2f}×" for k in ("pp", "tg")
                ]
            cells += [
                f"{100 * r['tg_of_roofline']:.0f}% ({100 * r['llamacpp_tg_of_roofline']:.0f}%) "
                f"of {r['roofline_tok_s']:.1f}",
                f"{r['pp_gflops']:.0f} ({r['llamacpp_pp_gflops']:.0f})",
                _of_peak(r),
                f"{r['load_s']:.2f} s" if "load_s" in r else "—",
                f"{r['peak_rss'] / 2**20:.0f} MiB" if "peak_rss" in r else "—",
            ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def header(a, started: str, load: tuple[float, float, float] | None) -> str:
    bw = [r["bandwidth"] for r in a._rows if "bandwidth" in r]
    parts = [
        f"{started}, {cpu_name()}, {os.cpu_count()} logical CPUs, {a.threads} threads for both, "
        f"median of {a.rounds} alternating rounds; llama.cpp {LLAMACPP_VERSION} (llama-cpp-python's vendored copy"
        + (", through llama-cpp-python, pip's native build" if a.llama_python else ", llama-bench")
        + (
            " builds " + ", ".join(f"{k} -> {v}" for k, v in a._builds.items())
            if a._builds and not a.llama_python
            else ""
        )
        + "); "
        f"ours from {a.ours_root} ({_git_head(a.ours_root)})"
    ]
    if bw:
        parts.append(f"read bandwidth {min(bw) / 1e9:.1f}–{max(bw) / 1e9:.1f} GB/s ({a.threads} threads)")
    waited = [r["tg_waited"] for r in a._rows if "tg_waited" in r]
    if waited:
        parts.append(
            f"our generation's driving thread waited on a stalled thread {100 * min(waited):.1f}–"
            f"{100 * max(waited):.1f}% of the time (llambda bench's waited)"
        )
    if load:
        parts.append("load average at the start %.2f %.2f %.2f" % load)
    return "; ".join(parts) + ". " + FLOPS_NOTE + "."


def llamacpp_binary(builds: Path, isa: str, native: bool) -> Path:
    """llama-bench of the build that runs against our level `isa`: LLAMACPP_BUILD's, or native with
    --native or where that build was never made (a cache from before the avx512 build existed)."""
    build = LLAMACPP_BUILD[isa]
    if isa == "avx512" and (native or not (builds / build / "bin" / "llama-bench").exists()):
        build = "native"
    return builds / build / "bin" / "llama-bench"


def _git_head(root: Path) -> str:
    try:
        r = subprocess.run(
            ["git", "-C", str(root), "log", "-1", "--format=%h %s"], capture_output=True, text=True, timeout=10
        )
        return r.stdout.strip()[:80] or "not a git checkout"
    except (OSError, subprocess.TimeoutExpired):
        return "unknown commit"


def main(argv=None) -> int:
    a = parse_args(argv)
    levels = a.isa or available_levels()
    have = available_levels()
    builds = a.llamacpp_dir or bench_cache() / "llama.cpp" / LLAMACPP_VERSION
    started = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    try:
        load = os.getloadavg()
    except OSError:
        load = None
    a._rows = rows = []
    a._builds = {}
    for name in a.models:
        # a .gguf path is its own type: run once, whatever --types says
        for qtype in a.types if not name.endswith(".gguf") else ["as in file"]:
            for isa in levels:
                if isa not in have:
                    rows.append({"model": name, "type": qtype, "isa": isa, "error": f"this CPU has no {isa}"})
                    continue
                binary = llamacpp_binary(builds, isa, a.native)
                a._builds[isa] = binary.parent.parent.name
                t0 = time.monotonic()
                row = bench_one(a, name, qtype, isa, binary)
                rows.append(row)
                print(
                    f"{name} {qtype} {isa}: "
                    + (row["error"] if "error" in row else f"pp {row['pp_ratio']:.2f}×, tg {row['tg_ratio']:.2f}×")
                    + f" ({time.monotonic() - t0:.0f} s)",
                    file=sys.stderr,
                    flush=True,
                )
    if a.json:
        print(json.dumps(rows))
    text = header(a, started, load) + "\n\n" + table(rows, a) + "\n"
    if not a.json:
        print(text)
    if a.out:
        a.out.write_text(text)
    return 0 if rows and all("error" not in r for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
