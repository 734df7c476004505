"""Command-line faces of the engine: `llambda generate`, `chat`, `bench` and `perplexity`.

Each command is a pair: `add_<name>_args(parser)` declares its flags, `run_<name>(args) -> int`
runs it and returns the exit code (errors are raised as LlambdaError; app/cli.py prints them).
Text goes to stdout; statistics and notices go to stderr, so stdout stays the answer alone.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import statistics
import sys
import time
from types import FrameType
from typing import Sequence, TextIO

import numpy as np

from app import defaults as D
from app import kernels
from app.engine import perplexity as P
from app.engine.decoder import CDecoder
from app.engine.engine import Chat, Engine
from app.engine.generate import ContextShifted, Finished, GenerationRequest, TextPiece
from app.engine.kvstore import KVStore
from app.engine.sampler import SamplerSettings
from app.engine.speculative import draft_memory, resolve_draft
from app.engine.threads import fastest, save_measured
from app.errors import EXIT_BAD_FILE, EXIT_OK, EXIT_USAGE, LlambdaError, OutOfMemoryError, exit_code_for
from app.gguf import open_gguf
from app.library import resolve_model
from app.library.preflight import fitting_context, preflight
from app.model import config_from_gguf, require_supported

__all__ = [
    "add_generate_args",
    "run_generate",
    "add_chat_args",
    "run_chat",
    "add_bench_args",
    "run_bench",
    "bench",
    "add_perplexity_args",
    "run_perplexity",
    "PERPLEXITY_HELP",
]


def _whole_number(text: str, least: int, complaint: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if v < least:
        raise argparse.ArgumentTypeError(f"{v} {complaint}")
    return v


def positive_int(text: str) -> int:
    return _whole_number(text, 1, "is not a positive number")


def _nonneg_int(text: str) -> int:
    return _whole_number(text, 0, "is below 0")


def _int_list(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of numbers") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: every value must be a positive number")
    return values


def _threads_list(text: str) -> list[int] | str:
    """`--threads` of bench: a comma-separated list, or "auto" (1..the usable CPUs)."""
    if text.strip().lower() == "auto":
        return "auto"
    return _int_list(text)


def _common_model_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", help="a GGUF file, or the name of a model in the library")
    p.add_argument("--threads", type=int, default=D.THREADS, help="worker threads (default: physical cores)")
    p.add_argument(
        "--ctx",
        type=positive_int,
        default=None,
        help="context length in tokens (default: the training length, capped by what fits in memory)",
    )
    p.add_argument(
        "--kv-type", choices=D.KV_TYPES, default=D.KV_TYPE, help="KV cache precision (q8_0: half the memory of f16)"
    )
    p.add_argument("--batch", type=positive_int, default=D.N_BATCH, help="prompt tokens per decoder call")


def _draft_max(text: str) -> int:
    v = _whole_number(text, 1, "is not in 1..16")
    if v > 16:
        raise argparse.ArgumentTypeError(f"{v} is not in 1..16")
    return v


def _speculation_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--speculation",
        choices=("lookup", "off"),
        default=D.SPECULATION,
        help="prompt lookup guesses tokens from the conversation and checks several in "
        "one pass where that pays (default); off: one token per pass",
    )
    p.add_argument(
        "--draft",
        metavar="MODEL",
        default=None,
        help="a small model of the same vocabulary that guesses tokens for the main one "
        "(auto: the smallest such model in the library)",
    )
    p.add_argument(
        "--draft-max",
        metavar="K",
        type=_draft_max,
        default=D.DRAFT_MAX,
        help=f"most tokens guessed per pass (1..16, default {D.DRAFT_MAX})",
    )


def _sampling_args(p: argparse.ArgumentParser) -> None:
    """The sampling flags; every default is app/defaults.py's."""
    p.add_argument("--max-tokens", type=int, default=D.MAX_TOKENS, help="most tokens to generate")
    p.add_argument("--temperature", type=float, default=D.TEMPERATURE, help="0 = greedy")
    p.add_argument("--top-k", type=int, default=D.TOP_K, help="0 = off")
    p.add_argument("--top-p", type=float, default=D.TOP_P, help="1 = off")
    p.add_argument("--min-p", type=float, default=D.MIN_P, help="0 = off")
    p.add_argument("--repeat-penalty", type=float, default=D.REPEAT_PENALTY, help="1 = off")
    p.add_argument("--frequency-penalty", type=float, default=D.FREQUENCY_PENALTY)
    p.add_argument("--presence-penalty", type=float, default=D.PRESENCE_PENALTY)
    p.add_argument("--penalty-last-n", type=int, default=D.PENALTY_LAST_N, help="window of the penalties")
    p.add_argument(
        "--seed", type=int, default=D.seed_or_none(D.SEED), help="same seed and settings, same text (default: random)"
    )


def _sampler(args: argparse.Namespace) -> SamplerSettings:
    try:
        return SamplerSettings(
            temperature=args.temperature,
            top_k=args.top_k,
            top_p=args.top_p,
            min_p=args.min_p,
            repeat_penalty=args.repeat_penalty,
            frequency_penalty=args.frequency_penalty,
            presence_penalty=args.presence_penalty,
            penalty_last_n=args.penalty_last_n,
            seed=args.seed,
        )
    except ValueError as e:
        raise _Usage(str(e)) from None


class _Usage(Exception):
    pass


def _resolve(model: str) -> str:
    return resolve_model(model)


def open_engine(args: argparse.Namespace, n_ctx: int | None = None, kv_store: KVStore | None = None) -> Engine:
    """An Engine for the command's model, after the memory pre-flight (refuse: exit code 5)."""
    path = _resolve(args.model)
    draft = resolve_draft(path, getattr(args, "draft", None))
    if getattr(args, "draft", None) == "auto":  # the smallest model of the library with the same vocabulary
        print(
            f"llambda: draft model: {draft or 'none compatible in the library; prompt lookup instead'}", file=sys.stderr
        )
    n_ctx, why = n_ctx or args.ctx, "as asked"
    if not n_ctx:  # the training length, capped by what fits with this KV type
        with open_gguf(path) as f:
            n_ctx, why = fitting_context(f, args.kv_type)
    report = preflight(path, n_ctx, args.kv_type)
    if report.memory_verdict == "refuse":
        raise OutOfMemoryError(f"{path}: {report.summary()}")
    if draft:  # both models, each with its KV cache, at the same context
        verdict, msg = draft_memory(report, draft, args.kv_type)
        if verdict == "refuse":
            raise OutOfMemoryError(f"{path} with draft {draft}: {msg}")
    eng = Engine(
        path,
        n_ctx=n_ctx,
        n_threads=args.threads,
        kv_type=args.kv_type,
        n_batch=args.batch,
        kv_store=kv_store,
        speculation=getattr(args, "speculation", D.SPECULATION),
        draft=draft,
        draft_max=getattr(args, "draft_max", D.DRAFT_MAX),
    )
    eng.n_ctx_reason = why
    return eng


# --- generate -----------------------------------------------------------------------------------


def add_generate_args(p: argparse.ArgumentParser) -> None:
    _common_model_args(p)
    p.add_argument("--prompt", required=True, help="the user's message (or the raw text with --raw)")
    p.add_argument("--raw", action="store_true", help="no chat template: tokenize the prompt as-is")
    p.add_argument("--system", default=None, help="system prompt (chat template only)")
    p.add_argument("--stop", action="append", default=[], help="stop string (repeatable)")
    _sampling_args(p)
    _speculation_args(p)
    p.add_argument(
        "--json", action="store_true", help="print one JSON object: prompt_ids, ids, text, stop_reason, stats"
    )


def run_generate(args: argparse.Namespace) -> int:
    try:
        sampler = _sampler(args)
        if args.raw and args.system:
            raise _Usage("--system needs the chat template (drop --raw)")
        if args.max_tokens < 0:
            raise _Usage("--max-tokens must be >= 0")
    except _Usage as e:
        print(f"llambda generate: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    with open_engine(args) as eng:
        if args.raw:
            ids = eng.raw_prompt(args.prompt)
        else:
            msgs = ([{"role": "system", "content": args.system}] if args.system else []) + [
                {"role": "user", "content": args.prompt}
            ]
            ids = eng.chat_prompt(msgs)
        req = GenerationRequest(tuple(ids), max_tokens=args.max_tokens, sampler=sampler, stop_strings=tuple(args.stop))
        fin: Finished | None = None
        with _sigint_cancels(eng):
            for ev in eng.generate(req):
                if isinstance(ev, TextPiece) and not args.json:
                    sys.stdout.write(ev.text)
                    sys.stdout.flush()
                elif isinstance(ev, Finished):
                    fin = ev
        assert fin is not None  # generate() always ends with one Finished
        if args.json:
            print(
                json.dumps(
                    {
                        "prompt_ids": list(fin.prompt_ids),
                        "ids": list(fin.ids),
                        "text": fin.text,
                        "stop_reason": fin.stop_reason,
                        "stats": fin.stats.as_dict(),
                    },
                    ensure_ascii=False,
                )
            )
        else:
            sys.stdout.write("\n")
            print(f"[{fin.stop_reason}] {fin.stats.summary()}", file=sys.stderr)
    return EXIT_OK


class _sigint_cancels:
    """While active, Ctrl+C cancels the engine's generation (within one token) instead of
    killing the process; a second Ctrl+C interrupts as usual."""

    def __init__(self, eng: Engine):
        self.eng = eng
        self.hits = 0

    def _handler(self, signum: int, frame: FrameType | None) -> None:
        self.hits += 1
        if self.hits > 1:
            raise KeyboardInterrupt
        self.eng.cancel()

    def __enter__(self) -> _sigint_cancels:
        try:
            self._old = signal.signal(signal.SIGINT, self._handler)
        except ValueError:  # not the main thread: leave signals alone
            self._old = None
        return self

    def __exit__(self, *exc: object) -> None:
        if self._old is not None:
            signal.signal(signal.SIGINT, self._old)


# --- chat ---------------------------------------------------------------------------------------


def add_chat_args(p: argparse.ArgumentParser) -> None:
    _common_model_args(p)
    p.add_argument("--system", default=None, help="system prompt")
    p.add_argument(
        "--context-policy",
        choices=("shift", "stop"),
        default=D.OVERFLOW,
        help="when the context is full: drop the oldest turns (shift) or stop",
    )
    p.add_argument(
        "--no-kv-cache",
        action="store_true",
        help="do not save or restore the conversation's KV state in the cache folder",
    )
    _sampling_args(p)
    _speculation_args(p)


def run_chat(args: argparse.Namespace, stdin: TextIO | None = None, stdout: TextIO | None = None) -> int:
    """A terminal chat: type a message, the reply streams; Ctrl+C stops a reply, Ctrl+D or /exit
    leaves; /reset forgets the conversation."""
    stdin = stdin or sys.stdin
    stdout = stdout or sys.stdout
    try:
        sampler = _sampler(args)
    except _Usage as e:
        print(f"llambda chat: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    interactive = stdin.isatty()
    store = None if getattr(args, "no_kv_cache", False) else KVStore()
    with open_engine(args, kv_store=store) as eng:
        chat = Chat(eng, system=args.system, context_policy=args.context_policy)
        print(
            f"llambda chat: {eng.path} ({eng.n_ctx} tokens of context: {eng.n_ctx_reason}; "
            f"{eng.kv_type} KV cache, {eng.n_threads} threads). "
            "Ctrl+C stops a reply, /reset forgets, /exit or Ctrl+D leaves.",
            file=sys.stderr,
        )
        while True:
            if interactive:
                stdout.write("> ")
                stdout.flush()
            try:
                line = stdin.readline()
            except KeyboardInterrupt:
                stdout.write("\n")
                break
            if not line:
                break
            text = line.rstrip("\n")
            if not text.strip():
                continue
            if text.strip() == "/exit":
                break
            if text.strip() == "/reset":
                chat = Chat(eng, system=args.system, context_policy=args.context_policy)
                print("(conversation forgotten)", file=sys.stderr)
                continue
            with _sigint_cancels(eng):
                for ev in chat.send(text, sampler, max_tokens=args.max_tokens):
                    if isinstance(ev, TextPiece):
                        stdout.write(ev.text)
                        stdout.flush()
                    elif isinstance(ev, ContextShifted):
                        what = (
                            f"{ev.dropped_turns} oldest turn{'s' if ev.dropped_turns != 1 else ''}"
                            if ev.dropped_turns
                            else f"{ev.dropped} oldest tokens of this reply's context"
                        )
                        print(f"\n(context full: dropped {what})", file=sys.stderr)
                    elif isinstance(ev, Finished):
                        stdout.write("\n")
                        stdout.flush()
                        note = " (stopped)" if ev.stop_reason == "cancelled" else ""
                        print(
                            f"[{ev.stats.generated_tokens} tok, {ev.stats.generation_tok_s:.1f} tok/s{note}]",
                            file=sys.stderr,
                        )
                chat.save_state()  # a chat that opens the same way later starts warm
    return EXIT_OK


# --- bench --------------------------------------------------------------------------------------


def add_bench_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", nargs="?", help="a GGUF file, or the name of a model in the library")
    p.add_argument(
        "--threads",
        type=_threads_list,
        default=[1, 2],
        help="comma-separated, e.g. 1,2; or auto: try 1..N (N = usable CPUs), say which is "
        "fastest for prompts (pp) and for generation (tg), and remember it for the "
        "window's settings",
    )
    p.add_argument("--pp", type=_int_list, default=[512], help="prompt lengths, e.g. 512")
    p.add_argument("--tg", type=_int_list, default=[128], help="generation lengths, e.g. 128")
    p.add_argument("--reps", type=positive_int, default=3, help="repetitions of each test")
    p.add_argument("--kv-type", choices=("f16", "f32", "q8_0"), default="f16")
    p.add_argument(
        "--depth",
        type=_nonneg_int,
        default=0,
        help="tokens already in the cache before each test (llama-bench's -d): generation deep in a conversation",
    )
    p.add_argument(
        "--kernels",
        action="store_true",
        help="instead: the kernel library's matrix x vector bytes/s per tensor type "
        "against memory bandwidth (no MODEL needed)",
    )
    p.add_argument("--json", action="store_true", help='print a list of {"threads", "test", "tok_s", ...}')


def bench(
    path: str,
    threads: Sequence[int] = (1, 2),
    pp: Sequence[int] = (512,),
    tg: Sequence[int] = (128,),
    reps: int = 3,
    kv_type: str = "f16",
    depth: int = 0,
) -> list[dict]:
    """Like llama-bench: ppN decodes N random tokens in one batch; tgN decodes N tokens one call
    each; both from an empty cache, or after `depth` random tokens already in it (llama-bench's
    -d: the prefix is decoded once per thread count, untimed). Each test runs once to warm up, then
    `reps` times; tok_s is the mean of the runs (stdev alongside). tok_per_cpu_s divides by the
    process's CPU time instead of wall time: on a shared machine it shows the cost of the work
    whatever the other processes do (spinning threads count as work). waited is the share of the
    timed runs the driving thread spent waiting on another thread's last chunk of a step, and
    stalls_per_s how often per second such a wait passed 100 us: a thread the OS or the hypervisor
    stopped mid-step, which holds up every thread (a quiet machine shows few)."""
    rows = []
    with open_gguf(path) as f:
        require_supported(f)
        cfg = config_from_gguf(f)
        n_ctx = depth + max(max(pp), max(tg)) + 1
        rng = np.random.default_rng(0)
        for nt in threads:
            with CDecoder(f, cfg, n_ctx, kv_type=kv_type, n_threads=nt, n_batch=max(pp)) as d:
                if depth:
                    d.decode([int(t) for t in rng.integers(0, cfg.n_vocab, depth)], 0)
                tests = [("pp", n) for n in pp] + [("tg", n) for n in tg]
                for kind, n in tests:
                    ids = [int(t) for t in rng.integers(0, cfg.n_vocab, n)]
                    runs, cpu_runs = [], []
                    wall = waited = stalls = 0.0
                    for r in range(reps + 1):
                        t, c = time.perf_counter(), time.process_time()
                        w0, s0 = d.pool.waits()
                        if kind == "pp":
                            d.decode(ids, depth)
                        else:
                            for i, tok in enumerate(ids):
                                d.decode([tok], depth + i)
                        if r:  # the first run warms caches and pages
                            dt = time.perf_counter() - t
                            runs.append(n / dt)
                            cpu_runs.append(n / max(time.process_time() - c, 1e-9))
                            w1, s1 = d.pool.waits()
                            wall, waited, stalls = wall + dt, waited + (w1 - w0) * 1e-9, stalls + s1 - s0
                    rows.append(
                        {
                            "threads": d.n_threads,
                            "test": f"{kind}{n}",
                            "tok_s": round(statistics.mean(runs), 2),
                            "stdev": round(statistics.stdev(runs), 2) if len(runs) > 1 else 0.0,
                            "tok_per_cpu_s": round(statistics.mean(cpu_runs), 2),
                            "waited": round(waited / wall, 4) if wall > 0 else 0.0,
                            "stalls_per_s": round(stalls / wall, 1) if wall > 0 else 0.0,
                            "isa": d.isa,
                            "kv_type": kv_type,
                            "depth": depth,
                        }
                    )
    return rows


def run_bench(args: argparse.Namespace) -> int:
    auto = args.threads == "auto"
    if auto:
        args.threads = list(range(1, kernels.cpu_count_allowed() + 1))
    if args.kernels:
        rows = kernels.bench_kernels(threads=args.threads)
        print(json.dumps(rows) if args.json else kernels.format_bench(rows))
        return EXIT_OK
    if not args.model:
        print("llambda bench: error: a MODEL is needed (or --kernels)", file=sys.stderr)
        return EXIT_USAGE
    path = _resolve(args.model)
    rows = bench(path, args.threads, args.pp, args.tg, args.reps, args.kv_type, args.depth)
    best = {}
    if auto:
        best = fastest(rows)
        for r in best.values():
            r["fastest"] = True
        try:
            save_measured(best, path, args.threads)
        except OSError as e:
            print(f"llambda bench: could not remember the measured thread counts: {e}", file=sys.stderr)
    if args.json:
        print(json.dumps(rows))
        return EXIT_OK
    size = os.path.getsize(path)
    print(f"model: {path} ({size / 2**20:.1f} MiB)")
    print(f"{'threads':>7} {'test':>14} {'tok/s':>10} {'± stdev':>9} {'waited':>7} {'stalls/s':>8}  isa")
    for r in rows:
        test = r["test"] + (f" @ d{r['depth']}" if r["depth"] else "")
        print(
            f"{r['threads']:>7} {test:>14} {r['tok_s']:>10.2f} {r['stdev']:>9.2f} {100 * r['waited']:>6.1f}%"
            f" {r['stalls_per_s']:>8.1f}  {r['isa']}" + ("  <- fastest" if r.get("fastest") else "")
        )
    for kind, what in (("pp", "prompts"), ("tg", "generation")):
        if kind in best:
            r = best[kind]
            print(
                f"fastest for {what} ({r['test']}): {r['threads']} thread{'s' if r['threads'] > 1 else ''} "
                f"({r['tok_s']:.2f} tok/s)"
            )
    return EXIT_OK


# --- perplexity ---------------------------------------------------------------------------------

PERPLEXITY_HELP = (
    "Perplexity is how surprised the model is by a text it reads token by token (exp of the mean "
    "negative log-likelihood; lower is better), and the KL divergence (KLD) is how far its "
    "next-token distributions are from a base's, position by position (0 = identical). To see "
    "what a quantization costs, save a base from the best file you have (--save-logits BASE.bin "
    "with the F16 or Q8_0 model), then run each quantization with --kl-divergence BASE.bin on "
    "the same text: the lower the mean KLD and the higher the top-1 agreement, the closer it is."
)


def add_perplexity_args(p: argparse.ArgumentParser) -> None:
    p.description = PERPLEXITY_HELP
    p.add_argument("model", help="a GGUF file, or the name of a model in the library")
    p.add_argument("text", help="a UTF-8 text file (a few thousand tokens or more)")
    p.add_argument(
        "--ctx",
        type=positive_int,
        default=None,
        help="tokens per chunk; the second half of each chunk is scored (default 512, or the base's)",
    )
    p.add_argument(
        "--chunks",
        type=positive_int,
        default=None,
        help="at most N chunks (default: all the text fills, or the base's)",
    )
    p.add_argument("--threads", type=int, default=0, help="worker threads (default: physical cores)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument(
        "--save-logits",
        metavar="BASE.bin",
        default=None,
        help="write the scored positions' top log-probabilities, a base for --kl-divergence",
    )
    p.add_argument(
        "--kl-divergence",
        metavar="BASE.bin",
        default=None,
        help="compare with a base file: KLD, top-1 agreement, perplexity ratio",
    )


class _Progress:
    """A bar on a terminal, one plain line per chunk when stderr is piped or a file."""

    def __init__(self, n_chunks: int, stream: TextIO | None = None):
        self.stream = stream or sys.stderr
        self.n = n_chunks
        self.tty = getattr(self.stream, "isatty", lambda: False)()

    def update(self, done: int, tokens: int, seconds: float, ppl: float) -> None:
        rate = tokens / seconds if seconds > 0 else 0.0
        if self.tty:
            width = 30
            fill = width * done // self.n
            self.stream.write(
                f"\r[{'#' * fill}{'.' * (width - fill)}] chunk {done}/{self.n}  ppl {ppl:.4f}  {rate:.0f} tok/s "
            )
            if done == self.n:
                self.stream.write("\n")
        else:
            self.stream.write(f"chunk {done}/{self.n}: ppl {ppl:.4f}, {rate:.1f} tok/s\n")
        self.stream.flush()


def run_perplexity(args: argparse.Namespace) -> int:
    def fail(e: Exception | str, code: int) -> int:
        print(f"llambda perplexity: error: {e}", file=sys.stderr)
        return code

    try:
        base = P.read_base(args.kl_divergence) if args.kl_divergence else None
        if args.ctx is None:
            args.ctx = int(base.header["n_ctx"]) if base is not None else 512
        if args.save_logits:
            d = os.path.dirname(os.path.abspath(args.save_logits))
            if not os.path.isdir(d) or not os.access(d, os.W_OK):
                raise P.TextError(f"{args.save_logits}: its folder is missing or not writable")
        text = P.read_text(args.text)
    except P.BaseFileError as e:
        return fail(e, EXIT_BAD_FILE)
    except P.PerplexityError as e:
        return fail(e, EXIT_USAGE)
    if args.ctx < 8:
        return fail(f"--ctx {args.ctx} is too small (at least 8 tokens per chunk)", EXIT_USAGE)
    args.kv_type, args.batch, args.speculation = "f16", 512, "off"
    try:
        eng = open_engine(args, n_ctx=args.ctx)
    except ValueError as e:
        if isinstance(e, LlambdaError):
            raise
        return fail(e, EXIT_USAGE)  # e.g. --ctx beyond what the model can take
    with eng:
        tok = eng.tokenizer
        ids = tok.encode(text, add_special=True, parse_special=False)
        bos = tok.bos_id if tok.add_bos and tok.bos_id is not None else None
        n_chunks = args.chunks if args.chunks or base is None else base.n_chunks
        vocab = eng.file.metadata.get("tokenizer.ggml.tokens") or []
        vocab_hash = P.vocab_sha256(vocab)
        try:
            plan = P.make_plan(ids, args.ctx, bos, n_chunks, source=args.text)
            if base is not None:
                base.check_against(plan, eng.decoder.n_vocab, vocab_hash)
        except P.PerplexityError as e:
            return fail(e, EXIT_USAGE)
        progress = None if args.json and not sys.stderr.isatty() else _Progress(len(plan.chunks))
        if progress is not None:
            print(
                f"{os.path.basename(eng.path)}: {len(ids)} tokens of {os.path.basename(args.text)}, "
                f"{len(plan.chunks)} chunk{'s' if len(plan.chunks) != 1 else ''} of {plan.n_ctx}, "
                f"{plan.n_scored} scored each; kernels {eng.decoder.isa}, {eng.n_threads} threads",
                file=sys.stderr,
            )
        scores, seconds = [], 0.0
        for s in P.score_chunks(eng.decoder, plan, k=P.TOP_K if args.save_logits else 0, base=base):
            scores.append(s)
            seconds += s.seconds
            if progress is not None:
                nll = -np.concatenate([x.target_logprob for x in scores]).mean()
                progress.update(len(scores), len(scores) * plan.n_ctx, seconds, math.exp(nll))
        if base is not None:
            summary = P.kld_against(base, scores)
        else:
            summary = P.summarize(np.concatenate([s.target_logprob for s in scores]))
        if args.save_logits:
            model = {"file": os.path.basename(eng.path), "name": eng.file.metadata.get("general.name")}
            try:
                P.write_base(
                    args.save_logits,
                    plan,
                    scores,
                    eng.decoder.n_vocab,
                    vocab_hash,
                    model,
                    {"file": os.path.basename(args.text), "n_tokens": len(ids)},
                    f"llambda {eng.decoder.isa}",
                )
            except P.PerplexityError as e:
                return fail(e, 1)
    tok_s = len(plan.chunks) * plan.n_ctx / seconds if seconds > 0 else 0.0
    result = {
        "model": eng.path,
        "text": args.text,
        "n_ctx": plan.n_ctx,
        "n_chunks": len(plan.chunks),
        "tokens_per_second": round(tok_s, 2),
        **summary.as_dict(),
    }
    if base is not None:
        result["base"] = base.describe()
    if args.save_logits:
        result["saved"] = args.save_logits
    if args.json:
        print(json.dumps(result))
        return EXIT_OK
    print(
        f"perplexity: {summary.ppl:.4f} ± {summary.ppl_se:.4f} over {summary.n_positions} positions ({tok_s:.1f} tok/s)"
    )
    if base is not None:
        print(f"base: {base.describe()}, perplexity {summary.base_ppl:.4f}")
        print(f"perplexity ratio: {summary.ppl_ratio:.4f} ± {summary.ppl_ratio_se:.4f}")
        print(
            f"KLD: mean {summary.kld_mean:.6f} ± {summary.kld_se:.6f}, median {summary.kld_median:.6f}, "
            f"p99 {summary.kld_p99:.6f}, max {summary.kld_max:.6f}"
        )
        assert summary.top1 is not None and summary.top1_se is not None  # set with a base
        print(f"top-1 agreement: {100 * summary.top1:.2f}% ± {100 * summary.top1_se:.2f}%")
    if args.save_logits:
        print(f"base saved: {args.save_logits}")
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m app.engine.cli generate|chat|bench|perplexity ...` (the same as `llambda <command>`)."""
    p = argparse.ArgumentParser(prog="python -m app.engine.cli")
    sub = p.add_subparsers(dest="command", required=True)
    for name, add, run in (
        ("generate", add_generate_args, run_generate),
        ("chat", add_chat_args, run_chat),
        ("bench", add_bench_args, run_bench),
        ("perplexity", add_perplexity_args, run_perplexity),
    ):
        sp = sub.add_parser(name)
        add(sp)
        sp.set_defaults(run=run)
    args = p.parse_args(argv)
    try:
        return args.run(args)
    except LlambdaError as e:
        print(f"llambda: error: {e}", file=sys.stderr)
        return exit_code_for(e)


if __name__ == "__main__":
    sys.exit(main())
