"""Smoke tests of the benchmark scripts, without llama.cpp and without big files:
make_bench_models writes a GGUF our reader opens and `llambda bench` runs on; bench_shapes parses
its filters, runs a fake llama-bench beside ours and turns failures into table lines."""

from __future__ import annotations

import math
import platform
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from scripts import bench_shapes, make_bench_models as mbm


def test_real_shapes_have_the_published_parameter_counts():
    """Parameters of the plan (embedding counted once when tied) match the models' cards."""
    want = {
        "llama3.2-1b": 1.236e9,
        "llama3.2-3b": 3.213e9,
        "qwen2.5-1.5b": 1.544e9,
        "llama3.1-8b": 8.030e9,
        "phi3-mini": 3.821e9,
        "gemma2-2b": 2.614e9,
    }
    for name, n in want.items():
        total = sum(math.prod(shp) for _, shp, _ in mbm.tensor_plan(mbm.SHAPES[name]))
        assert abs(total - n) / n < 0.005, (name, total)


def test_padded_vocab_adds_distinct_unused_tokens():
    tok = {"tokens": ["a", "b", "c"], "types": [1, 1, 3]}
    tokens, types = mbm.padded_vocab(tok, 6)
    assert tokens[:3] == ["a", "b", "c"] and len(set(tokens)) == 6
    assert types == [1, 1, 3, 5, 5, 5]
    with pytest.raises(SystemExit):
        mbm.padded_vocab(tok, 2)


def test_cut_vocab_keeps_the_merges_among_the_first_tokens():
    tok = {
        "tokens": ["<s>", "a", "b", "ab", "c", "abc", "bc"],
        "types": [3, 1, 1, 1, 1, 1, 1],
        "merges": ["a b", "ab c", "b c"],
        "bos": 0,
        "eos": 0,
        "unk": None,
        "pad": None,
    }
    cut = mbm.cut_vocab(tok, 5)
    assert cut["tokens"] == ["<s>", "a", "b", "ab", "c"] and cut["types"] == [3, 1, 1, 1, 1]
    assert cut["merges"] == ["a b"]  # "ab c" makes a token that is gone, "b c" too
    with pytest.raises(SystemExit):
        mbm.cut_vocab({**tok, "eos": 6}, 5)


def test_llama3_rope_factors_span_one_to_the_factor():
    f = mbm.llama3_rope_factors(mbm.SHAPES["llama3.1-8b"])
    assert f.shape == (64,) and f[0] == 1.0 and f[-1] == 8.0
    assert all(a <= b for a, b in zip(f, f[1:]))


@pytest.fixture(scope="module")
def tiny_models(tmp_path_factory, smollm2_path):
    """The tiny shapes as F16 files, quantized by a stand-in llama-quantize (a copy)."""
    folder = tmp_path_factory.mktemp("bench-models")
    fake = folder / "fake-quantize"
    fake.write_text(f"#!{sys.executable}\nimport shutil, sys\nshutil.copy(sys.argv[1], sys.argv[2])\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    tok = mbm.read_tokenizer(smollm2_path)
    paths = {}
    for shape in ("tiny", "tiny-qwen2", "tiny-phi3", "tiny-gemma2"):
        paths[shape] = mbm.make_shape(shape, ["Q8_0"], folder, fake, tok, log=lambda m: None)[0]
    return folder, paths


def test_written_files_open_and_bench(tiny_models):
    from app.engine.cli import bench
    from app.gguf import open_gguf
    from app.model import config_from_gguf

    folder, paths = tiny_models
    assert not list(folder.glob("*.F16.gguf")), "the F16 file is removed once quantized"
    for shape, path in paths.items():
        s = mbm.SHAPES[shape]
        with open_gguf(path) as f:
            cfg = config_from_gguf(f)
            assert (cfg.n_embd, cfg.n_layer, cfg.n_head, cfg.n_head_kv, cfg.n_vocab) == (
                s.n_embd,
                s.n_layer,
                s.n_head,
                s.n_head_kv,
                s.n_vocab,
            )
            assert cfg.tied_output == s.tied and cfg.head_dim == s.head_dim and cfg.arch == s.arch
            assert ("blk.0.attn_q.bias" in f.tensors) == s.qkv_bias
            assert ("blk.0.attn_qkv.weight" in f.tensors) == s.fused == ("blk.0.ffn_gate.weight" not in f.tensors)
            assert ("blk.0.post_ffw_norm.weight" in f.tensors) == s.post_norms
            assert f.metadata.string("tokenizer.chat_template").startswith("{% for message")
        rows = bench(str(path), threads=(1,), pp=(8,), tg=(2,), reps=1)
        assert [r["test"] for r in rows] == ["pp8", "tg2"] and all(r["tok_s"] > 0 for r in rows)


def test_bench_shapes_parses_its_filters(tmp_path):
    a = bench_shapes.parse_args(["--models", "llama3.2-1b", "--types", "Q4_0,Q8_0", "--isa", "avx2", "--depth", "4096"])
    assert a.models == ["llama3.2-1b"] and a.types == ["Q4_0", "Q8_0"] and a.isa == ["avx2"]
    assert a.threads == 2 and a.depth == 4096
    for bad in (
        ["--types", "Q3_K"],
        ["--models", "gpt5"],
        ["--isa", "neon"],
        ["--threads", "0"],
        ["--ours-root", str(tmp_path)],
    ):
        with pytest.raises(SystemExit):
            bench_shapes.parse_args(bad)


def test_levels_from_cpu_flags():
    assert bench_shapes.available_levels({"avx2", "fma"}) == ["avx2"]
    assert bench_shapes.available_levels({"avx2", "fma", "avx512f", "avx512bw", "avx512vl"}) == ["avx2", "avx512"]
    assert bench_shapes.available_levels({"sse4_2"}) == []
    assert bench_shapes.available_levels({"avx2", "fma", "avx_vnni", "avx512f", "avx512bw", "avx512vl"}) == [
        "avx2",
        "avx2-vnni",
        "avx512",
    ]
    # our avx2 row is AVX2 alone even where the CPU has AVX-VNNI: llama.cpp's avx2 build has none
    assert bench_shapes.ours_env("avx2")["LLAMBDA_ISA"] == "avx2-novnni"
    assert bench_shapes.ours_env("avx2-vnni")["LLAMBDA_ISA"] == "avx2"


def test_llamacpp_build_per_level(tmp_path):
    """avx512 runs the avx512 build (no AMX) when it exists, else native; --native always native."""
    pick = bench_shapes.llamacpp_binary
    assert pick(tmp_path, "avx2", False) == tmp_path / "avx2" / "bin" / "llama-bench"
    assert pick(tmp_path, "avx2", True) == tmp_path / "avx2" / "bin" / "llama-bench"
    assert pick(tmp_path, "avx2-vnni", True) == tmp_path / "avxvnni" / "bin" / "llama-bench"
    assert pick(tmp_path, "avx512", False) == tmp_path / "native" / "bin" / "llama-bench"
    (tmp_path / "avx512" / "bin").mkdir(parents=True)
    (tmp_path / "avx512" / "bin" / "llama-bench").write_text("")
    assert pick(tmp_path, "avx512", False) == tmp_path / "avx512" / "bin" / "llama-bench"
    assert pick(tmp_path, "avx512", True) == tmp_path / "native" / "bin" / "llama-bench"
    assert bench_shapes.parse_args(["--native"]).native


def _fake_llama_bench(folder):
    """A llama-bench stand-in: prints llama-bench's JSON rows for the -p/-n it was given."""
    path = folder / "avx2" / "bin" / "llama-bench"
    path.parent.mkdir(parents=True)
    path.write_text(
        f"#!{sys.executable}\n"
        + r"""import json, sys
a = sys.argv
p, n = int(a[a.index("-p") + 1]), int(a[a.index("-n") + 1])
rows = [{"n_prompt": p, "n_gen": 0, "avg_ts": 100.0}]
if n:
    rows.append({"n_prompt": 0, "n_gen": n, "avg_ts": 10.0})
print(json.dumps(rows, indent=2))
"""
    )
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


@pytest.mark.skipif("avx2" not in bench_shapes.available_levels(), reason="the CPU has no AVX2")
def test_bench_shapes_table_with_a_fake_llama_bench_and_a_missing_model(tiny_models, tmp_path, capsys):
    _, paths = tiny_models
    builds = tmp_path / "builds"
    _fake_llama_bench(builds)
    out = tmp_path / "table.md"
    rc = bench_shapes.main(
        [
            "--models",
            f"{paths['tiny']},{tmp_path / 'absent.gguf'}",
            "--types",
            "Q8_0",
            "--isa",
            "avx2",
            "--rounds",
            "1",
            "--pp",
            "8",
            "--tg",
            "2",
            "--depth",
            "16",
            "--llamacpp-dir",
            str(builds),
            "--no-load",
            "--out",
            str(out),
        ]
    )
    assert rc == 1  # one model failed
    text = out.read_text()
    lines = [ln for ln in text.splitlines() if ln.startswith("| ")]
    assert len(lines) == 4  # header, rule, two models
    assert "pp8@d16 ours / llama.cpp" in lines[0] and "tg2@d16 ours / llama.cpp" in lines[0]
    good = next(ln for ln in lines if paths["tiny"].name in ln)
    # pp and tg, at depth 0 and at depth 16: two prompt and two generation ratios
    assert good.count("/ 100.0 = ") == 2 and good.count("/ 10.0 = ") == 2
    # tg against the roofline, and pp against the level's int8 peak: "ours% (llama.cpp's%) of ..."
    assert "pp % of int8 peak (llama.cpp)" in lines[0] and good.count("%) of ") == 2
    assert "waited on a stalled thread" in text  # how disturbed our generation was, in the header
    bad = next(ln for ln in lines if "absent.gguf" in ln)
    assert "failed:" in bad and "missing" in bad
    assert text in capsys.readouterr().out


@pytest.mark.slow
def test_load_time_and_peak_rss_of_a_tiny_model(tiny_models):
    _, paths = tiny_models
    a = bench_shapes.parse_args(["--threads", "1"])
    load_s, rss = bench_shapes.load_and_rss(a, paths["tiny"], bench_shapes.available_levels()[0])
    assert 0 < load_s < 600 and rss > paths["tiny"].stat().st_size


def _fake_python(path, body):
    """An 'interpreter' that ignores `-c CODE` and runs body with the remaining arguments."""
    path.write_text(f"#!{sys.executable}\nimport sys\nargv = sys.argv[3:]\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_quantize_through_a_python_with_llama_cpp(tmp_path):
    fake = _fake_python(
        tmp_path / "py", "import shutil\nshutil.copy(argv[0], argv[1])\nassert argv[2] == 'Q4_K_M' and argv[3] == '2'\n"
    )
    src = tmp_path / "a.gguf"
    src.write_bytes(b"GGUF")
    out = mbm.quantize(f"python:{fake}", src, tmp_path / "b.gguf", "Q4_K_M", 2, log=lambda m: None)
    assert out.read_bytes() == b"GGUF" and not (tmp_path / "b.gguf.part").exists()
    bad = _fake_python(tmp_path / "bad", "sys.exit(1)\n")
    with pytest.raises(RuntimeError, match="Q4_K_M failed"):
        mbm.quantize(f"python:{bad}", src, tmp_path / "c.gguf", "Q4_K_M", 2, log=lambda m: None)


def test_llama_python_instead_of_llama_bench(tmp_path):
    fake = _fake_python(
        tmp_path / "py",
        "import json\n"
        "print(json.dumps([{'test': 'pp' + argv[2], 'tok_s': 50.0},"
        " {'test': 'tg' + argv[3], 'tok_s': 5.0}]))\n",
    )
    a = bench_shapes.parse_args(["--llama-python", str(fake), "--pp", "8", "--tg", "2"])
    assert bench_shapes.run_llamacpp_py(a, tmp_path / "m.gguf", 0) == {"pp": 50.0, "tg": 5.0}


def test_bench_attention_times_each_level_in_both_modes(capsys):
    from scripts import bench_attention

    small = ["--depth", "600", "--heads", "4", "--kv-heads", "2", "--head-dim", "32", "--reps", "1", "--threads", "1"]
    assert bench_attention.main(small + ["--levels", "ref,avx512", "--layers", "2"]) == 0
    assert bench_attention.main(small + ["--mode", "prompt", "--tokens", "20", "--levels", "ref"]) == 0
    assert bench_attention.main(small + ["--kv-type", "q8_0", "--levels", "ref", "--layers", "1"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("ref: one token at depth 600, 2 layers: ") and "GB/s of cache" in out[0]
    assert out[1].startswith("avx512") and ("not on this CPU, skipped" in out[1] or "GB/s of cache" in out[1])
    assert out[2].startswith("ref: prompt of 20 at depth 600, one layer: ")
    # a Q8_0 cache holds 34 bytes per 32 values: 600 positions x 2 heads x 34 x 2 (K, V) per layer
    gbs, ms = float(out[3].split(" GB/s")[0].split()[-1]), float(out[3].split(": ")[2].split(" ms")[0])
    assert out[3].startswith("ref: one token at depth 600, 1 layers: ")
    assert gbs == pytest.approx(600 * 2 * 34 * 2 / (ms * 1e-3) / 1e9, rel=0.05, abs=0.06)  # printed to 0.1
    with pytest.raises(SystemExit):
        bench_attention.main(["--levels", "avx9"])


# The C timing tools in scripts/ are x86-64 code (inline assembly, AVX2 intrinsics) built with gcc.
needs_gcc_on_x86 = pytest.mark.skipif(
    platform.machine().lower() not in ("x86_64", "amd64") or not shutil.which("gcc"),
    reason="needs gcc on an x86-64 machine",
)


def _build_script(name: str, tmp_path: Path, *flags: str) -> Path:
    """scripts/NAME.c built warning-free with gcc into tmp_path."""
    src = Path(__file__).resolve().parents[2] / "scripts" / f"{name}.c"
    exe = tmp_path / name
    subprocess.run(["gcc", *flags, "-Wall", "-Wextra", "-Werror", str(src), "-o", str(exe)], check=True)
    return exe


@needs_gcc_on_x86
def test_issue_rates_builds_and_times_every_mix(tmp_path):
    """scripts/issue_rates.c builds warning-free and, run with few loops, prints a positive cycle count
    for each of its lines; the vpdpbusd lines exactly when the CPU has AVX-VNNI."""
    exe = _build_script("issue_rates", tmp_path, "-O2")
    out = subprocess.run([str(exe), "20000"], check=True, capture_output=True, text=True, timeout=60).stdout
    head, _, vnni_part = out.partition("per vpdpbusd")
    rates = [line for line in head.splitlines() if line.endswith(" cycles")]
    vnni = [line for line in vnni_part.splitlines() if line.endswith(" cycles")]
    assert len(rates) == 12
    assert all(float(line.split()[-2]) > 0 for line in rates + vnni)
    flags = bench_shapes.cpu_flags()
    if flags:
        assert len(vnni) == (8 if "avx_vnni" in flags else 0), out


@needs_gcc_on_x86
def test_kdots_int16_builds_and_both_ways_give_the_same_sums(tmp_path):
    """scripts/kdots_int16.c builds warning-free and, run with few loops on an AVX2 CPU, times both
    ways of the K dots and finds their sums equal (its exit status says so)."""
    exe = _build_script("kdots_int16", tmp_path, "-O3", "-mavx2", "-mfma")
    flags = bench_shapes.cpu_flags()
    if flags and "avx2" not in flags:
        pytest.skip("no AVX2 on this CPU")
    out = subprocess.run([str(exe), "2000"], check=True, capture_output=True, text=True, timeout=60).stdout
    assert "same sums: yes" in out
    assert len([line for line in out.splitlines() if "ns per position and head" in line]) == 2
