"""How much an 8-bit (q8_0) KV cache changes a model's predictions, ours next to llama.cpp's:
the same token ids in chunks of --chunk (each starting with BOS), the second half of each chunk
scored, the q8_0 cache's full distributions compared with the f16 cache's of the same engine:
mean and p99 KL divergence, top-1 agreement. Prints one JSON line per engine.

    python -m scripts.kld_kv_q8 MODEL.gguf [--text FILE] [--chunk 512] [--chunks 4]
        [--kv-types f16,q8_0] [--llama-python ~/.cache/llambda-test/llama-cpp-venv/bin/python]

--kv-types names the reference cache and the one compared with it; `f16,f32` measures how much a
tiny change (float16 rounding of the cache) grows on its way to the logits in each engine, which
tells an engine's own sensitivity apart from what its 8-bit cache does. (llama.cpp's f32 cache under
flash attention gave exactly its f16 logits when measured, so its side of `f16,f32` reads 0; its floor
was measured against a bf16 cache instead, which this script does not offer because ours has none.)

llama.cpp quantizes its V cache only with flash attention on, so its q8_0 run uses it (and its
f16 run does too, so that the comparison changes the cache type alone). With llama.cpp there, a
last line compares the two engines' figures position by position: the mean of (our KLD - its KLD)
with its standard error (the two are measured on the same positions, so the paired difference has
a far smaller error than either mean).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

LLAMA = r"""
import json, sys
import numpy as np
from llama_cpp import Llama
a = json.loads(sys.argv[1])
out = {}
for name in a["kv_types"]:
    t = {"f32": 0, "f16": 1, "q8_0": 8}[name]
    llm = Llama(model_path=a["model"], n_ctx=a["chunk"], n_batch=a["chunk"], logits_all=True,
                n_threads=2, seed=0, verbose=False, type_k=t, type_v=t, flash_attn=True)
    rows = []
    for ids in a["chunks"]:
        llm.reset()
        llm.eval(ids)
        rows.append(np.array(llm.scores[len(ids) // 2:len(ids) - 1], np.float32))
    out[name] = np.concatenate(rows)
np.savez(a["out"], **out)
"""


def kld_rows(p_logits: np.ndarray, q_logits: np.ndarray) -> np.ndarray:
    """KL(p || q) per position, over the full vocabulary."""

    def logsm(x):
        x = x.astype(np.float64) - x.max(1, keepdims=True)
        return x - np.log(np.exp(x).sum(1, keepdims=True))

    return np.concatenate(
        [
            (np.exp(lp) * (lp - lq)).sum(1)
            for lp, lq in (
                (logsm(p_logits[i : i + 32]), logsm(q_logits[i : i + 32])) for i in range(0, len(p_logits), 32)
            )
        ]
    )


def kld_stats(p_logits: np.ndarray, q_logits: np.ndarray) -> dict:
    kld = kld_rows(p_logits, q_logits)
    return {
        "tokens": int(kld.size),
        "kld_mean": float(kld.mean()),
        "kld_se": float(kld.std(ddof=1) / np.sqrt(kld.size)),
        "kld_p99": float(np.percentile(kld, 99)),
        "top1_agree": float((p_logits.argmax(1) == q_logits.argmax(1)).mean()),
    }


def paired(ours: np.ndarray, theirs: np.ndarray) -> dict:
    """Our per-position KLDs against llama.cpp's on the same positions: the ratio of the means and
    the mean difference with its standard error."""
    d = ours - theirs
    se = float(d.std(ddof=1) / np.sqrt(d.size))
    return {"ratio": float(ours.mean() / theirs.mean()), "diff": float(d.mean()), "diff_se": se}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("--text", default=os.path.join(ROOT, "README.md"))
    ap.add_argument("--chunk", type=int, default=512)
    ap.add_argument("--chunks", type=int, default=4)
    ap.add_argument("--kv-types", default="f16,q8_0", help="reference,compared (of f32, f16, q8_0)")
    ap.add_argument("--llama-python", default=os.path.expanduser("~/.cache/llambda-test/llama-cpp-venv/bin/python"))
    a = ap.parse_args()
    ref, cmp = a.kv_types.split(",")
    sys.path.insert(0, ROOT)
    from app.engine.engine import Engine

    out = {}
    with Engine(a.model, n_ctx=a.chunk, n_threads=2, kv_type="f16") as eng:
        text = open(a.text, encoding="utf-8").read()
        ids = eng.tokenizer.encode(text, add_special=False, parse_special=False)
        head = [eng.tokenizer.bos_id] if eng.tokenizer.bos_id is not None else []
        n = a.chunk - len(head)
        chunks = [head + ids[i * n : (i + 1) * n] for i in range(min(a.chunks, len(ids) // n))]
    for kv in (ref, cmp):
        with Engine(a.model, n_ctx=a.chunk, n_threads=2, kv_type=kv) as eng:
            out[kv] = np.concatenate(
                [eng.decoder.decode(c, 0, all_logits=True)[len(c) // 2 : len(c) - 1] for c in chunks]
            )
    print(
        json.dumps(
            {"engine": "llambda", "model": os.path.basename(a.model), **kld_stats(out[ref], out[cmp]), "kv": a.kv_types}
        ),
        flush=True,
    )
    ok = (
        os.path.exists(a.llama_python)
        and subprocess.run([a.llama_python, "-c", "import llama_cpp"], capture_output=True).returncode == 0
    )
    if not ok:
        print(f"(llama.cpp not available at {a.llama_python}: its figures are skipped)", file=sys.stderr)
    else:
        import tempfile

        with tempfile.TemporaryDirectory() as d:
            npz = os.path.join(d, "l.npz")
            subprocess.run(
                [
                    a.llama_python,
                    "-c",
                    LLAMA,
                    json.dumps(
                        {
                            "model": os.path.abspath(a.model),
                            "chunk": a.chunk,
                            "chunks": chunks,
                            "out": npz,
                            "kv_types": [ref, cmp],
                        }
                    ),
                ],
                check=True,
            )
            z = np.load(npz)
            print(
                json.dumps(
                    {
                        "engine": "llama.cpp",
                        "model": os.path.basename(a.model),
                        **kld_stats(z[ref], z[cmp]),
                        "kv": a.kv_types,
                    }
                ),
                flush=True,
            )
            print(json.dumps({"engine": f"llambda {ref} vs llama.cpp {ref}", **kld_stats(z[ref], out[ref])}))
            ours, theirs = kld_rows(out[ref], out[cmp]), kld_rows(z[ref], z[cmp])
            print(json.dumps({f"{cmp} KLD, llambda against llama.cpp, paired": paired(ours, theirs)}))


if __name__ == "__main__":
    main()
