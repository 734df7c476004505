"""Pre-tokenizer split expressions for byte-level BPE, keyed by `tokenizer.ggml.pre`.

Each value of `tokenizer.ggml.pre` names an ordered list of split expressions; text is cut by
the first, each piece by the next, and so on (every match isolated). These lists are facts of
the released tokenizers (their `tokenizer.json` pre-tokenizers, as llama.cpp reads them).
An unknown name falls back to "default" with a warning.
"""

from __future__ import annotations

# Building blocks shared by several families.
_CONTRACTIONS = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
_GPT2 = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)"
_LLAMA3 = _CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
_QWEN2 = _CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
# Upper-then-lower word shapes written with lookaheads (letters that are not a-z, then letters that
# are not A-Z), the form llama.cpp runs; combining marks are not part of these words.
_CASED = (
    r"[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+{c}"
    r"|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*{c}"
)
_DEEPSEEK_LETTERS = (  # written with escapes: several of these letters have canonical decompositions
    "[A-Za-z\xb5\xc0-\xd6\xd8-\xf6\xf8-\u01ba\u01bc-\u01bf\u01c4-\u0293\u0295-\u02af\u0370-\u0373"
    "\u0376\u0377\u037b-\u037d\u037f\u0386\u0388-\u038a\u038c\u038e-\u03a1\u03a3-\u03f5\u03f7-\u0481"
    "\u048a-\u052f\u0531-\u0556\u10a0-\u10c5\u13a0-\u13f5\u13f8-\u13fd\u1c90-\u1cba\u1cbd-\u1cbf"
    "\u1d00-\u1d2b\u1d6b-\u1d77\u1d79-\u1d9a\u1e00-\u1f15\u1f18-\u1f1d\u1f20-\u1f45\u1f48-\u1f4d"
    "\u1f50-\u1f57\u1f59\u1f5b\u1f5d\u1f5f-\u1f7d\u1f80-\u1fb4\u1fb6-\u1fbc\u1fbe\u1fc2-\u1fc4"
    "\u1fc6-\u1fcc\u1fd0-\u1fd3\u1fd6-\u1fdb\u1fe0-\u1fec\u1ff2-\u1ff4\u1ff6-\u1ffc\u2102\u2107"
    "\u210a-\u2113\u2115\u2119-\u211d\u2124\u2126\u2128\u212a-\u212d\u212f-\u2134\u2139\u213c-\u213f"
    "\u2145-\u2149\u214e\u2183\u2184\u2c00-\u2c7b\u2c7e-\u2ce4\u2ceb-\u2cee\u2cf2\u2cf3\ua640-\ua66d"
    "\ua680-\ua69b\ua722-\ua76f\ua771-\ua787\ua78b-\ua78e\uab70-\uabbf\ufb00-\ufb06\ufb13-\ufb17"
    "\uff21-\uff3a\uff41-\uff5a\U00010400-\U0001044f\U000104b0-\U000104d3\U000104d8-\U000104fb"
    "\U00010c80-\U00010cb2\U00010cc0-\U00010cf2\U000118a0-\U000118df\U0001e900-\U0001e943]+"
)
_DS3_MAIN = (
    r"[!\"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+"
    r"| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)

# llama.cpp runs expressions that name explicit non-ASCII ranges on text where every non-ASCII
# whitespace character has been replaced by U+000B, so such ranges never match those characters.
_NOT_WIDE_SPACE = "&&[^\u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]"
_CJK = "[\u4e00-\u9fa5\u0800-\u4e00\uac00-\ud7ff" + _NOT_WIDE_SPACE + "]+"

SPLITS: dict[str, list[str]] = {
    "default": [r"[\p{P}\$\+<=>\^~\|]+", _GPT2, r"\p{N}+", r"[0-9][0-9][0-9]"],
    "gpt2": [_GPT2],
    "llama3": [_LLAMA3],
    "qwen2": [_QWEN2],
    "qwen35": [
        _CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*"
        r"|\s*[\r\n]+|\s+(?!\S)|\s+"
    ],
    "starcoder": [r"\p{N}", _GPT2],
    "falcon": [r"[\p{P}\$\+<=>\^~\|`]+", _GPT2, r"[0-9][0-9][0-9]"],
    "deepseek-llm": [
        r"[\r\n]",
        r"\s?" + _DEEPSEEK_LETTERS,
        "\\s?[!-/:-~\uff01-\uff0f\uff1a-\uff5e\u2018-\u201f\u3000-\u3002" + _NOT_WIDE_SPACE + "]+",
        r"\s+\z",
        _CJK,
        r"\p{N}+",
    ],
    "deepseek-coder": [r"[\r\n]", r"\s?\p{L}+", r"\s?\p{P}+", _CJK, r"\p{N}"],
    "deepseek-v3": [r"\p{N}{1,3}", r"[一-龥぀-ゟ゠-ヿ]+", _DS3_MAIN],
    "bloom": [r" ?[^(\s|.,!?…。，、।۔،)]+"],
    "viking": [r" ?[^(\s|.,!?…。，、।۔،)]+", r"\p{N}"],
    "tekken": [_CASED.replace("{c}", "") + r"|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"],
    "gpt-4o": [
        _CASED.replace("{c}", _CONTRACTIONS + "?") + r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*"
        r"|\s*[\r\n]+|\s+(?!\S)|\s+"
    ],
    "chameleon": [
        r"<sentinel:[0-9]+>",
        r"(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z",
        r"([\t\n]|    |  )",
        r"\p{N}",
        r"[\p{P}!-/:-@\[-`{-~]",
        _GPT2,
    ],
    "superbpe": [r"\p{N}+", r"(?=(\d{3})+(?!\d))"],
    "bailingmoe": [
        r"'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
        r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+"
    ],
    "seed-coder": [
        _CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1}| ?[^\s\p{L}\p{N}\r\n]+|\s*[\r\n]+"
        r"|\s+(?!\S)|\s+"
    ],
    "minicpm5": [
        r"\p{N}{1,3}",
        _CONTRACTIONS + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}+| ?[^\s\p{L}\p{N}]+[\r\n]*"
        r"|\s*[\r\n]+|\s+(?!\S)|\s+",
    ],
}

# Other names that share one of the lists above.
ALIASES: dict[str, str] = {
    **dict.fromkeys(
        [
            "llama-bpe",
            "llama-v3",
            "falcon3",
            "falcon-h1",
            "pixtral",
            "midm-2.0",
            "lfm2",
            "jina-v5-nano",
            "dbrx",
            "smaug-bpe",
            "chatglm-bpe",
            "glm4",
            "glm5",
        ],
        "llama3",
    ),
    **dict.fromkeys(
        ["qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2", "stablelm2", "megrez", "hunyuan", "solar-open", "grok-2"],
        "qwen2",
    ),
    **dict.fromkeys(
        ["starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b", "mellum2"], "starcoder"
    ),
    **dict.fromkeys(
        [
            "gpt-2",
            "gpt2",
            "phi-2",
            "jina-es",
            "jina-de",
            "gigachat",
            "jina-v2-es",
            "jina-v2-de",
            "a.x-4.0",
            "mellum",
            "modern-bert",
            "jina-v1-en",
            "jina-v2-code",
            "roberta-bpe",
            "mpt",
            "olmo",
            "jais",
            "trillion",
            "granite-docling",
            "exaone4",
        ],
        "gpt2",
    ),
    **dict.fromkeys(["deepseek-v3", "hunyuan-dense", "joyai-llm", "hy_v4"], "deepseek-v3"),
    **dict.fromkeys(["bloom", "gpt3-finnish", "poro-chat"], "bloom"),
    **dict.fromkeys(["gpt-4o", "llama4", "kanana2", "talkie", "minimax-m2"], "gpt-4o"),
    **dict.fromkeys(["bailingmoe", "bailingmoe2", "llada-moe"], "bailingmoe"),
}

# Families where a whole pre-split word that is itself a token is taken as is, merges unused.
IGNORE_MERGES = frozenset(
    [
        "llama3",
        "llama-bpe",
        "llama-v3",
        "falcon3",
        "falcon-h1",
        "pixtral",
        "midm-2.0",
        "lfm2",
        "jina-v5-nano",
        "tekken",
        "glm4",
        "glm5",
        "minicpm5",
        "youtu",
        "granite-embed-multi-97m",
    ]
)


def split_expressions(pre: str) -> tuple[list[str], bool]:
    """(the split expressions for `pre`, whether `pre` is known). Empty `pre` means "default"."""
    if not pre or pre == "default":
        return SPLITS["default"], True
    key = ALIASES.get(pre, pre)
    if key in SPLITS:
        return SPLITS[key], True
    return SPLITS["default"], False


# Byte-level families whose detokenizer does not tidy spaces before punctuation ("clean_spaces").
NO_CLEAN_SPACES = frozenset(
    [
        "deepseek-llm",
        "deepseek-coder",
        "deepseek-v3",
        "spark2_5",
        "youtu",
        "sarvam-moe",
        "command-r",
        "qwen2",
        "deepseek-r1-qwen",
        "kormo",
        "f2llmv2",
        "qwen35",
        "poro-chat",
        "viking",
        "tekken",
        "smollm",
        "chameleon",
        "gpt-4o",
        "llama4",
        "kanana2",
        "talkie",
        "granite-embed-multi-97m",
        "tiny_aya",
        "cohere2moe",
        "superbpe",
        "trillion",
        "granite-docling",
        "bailingmoe",
        "bailingmoe2",
        "llada-moe",
        "seed-coder",
        "hunyuan",
        "hunyuan-dense",
        "hy_v4",
        "joyai-llm",
        "kimi-k2",
        "ufakzeka",
        "grok-2",
        "afmoe",
        "laguna",
        "minimax-m2",
        "solar-open",
    ]
)


def clean_up_spaces(text: bytes) -> bytes:
    """The space tidying of GPT-2-style detokenizers, on bytes: " ?", " !", " .", " ," lose the
    space; a lone " ' " loses both spaces (and the character after it); " 's", " 'm", " 're",
    " 've" lose the space."""
    if not text:
        return text
    buf = bytearray(text)
    space, quote = 0x20, 0x27

    # 1: no space before ? ! . ,
    n, out = len(buf), 1
    for i in range(1, n):
        x = buf[i]
        if buf[i - 1] == space and x in b"?!.,":
            out -= 1
        buf[out] = x
        out += 1
    # 2: " ' " becomes "'" (the character after the closing space is dropped with it)
    n, out, i = out, 1, 1
    while i < n:
        x = buf[i]
        if x == quote and i + 1 < n and buf[i - 1] == space and buf[i + 1] == space:
            out -= 1
            i += 1
            buf[i] = 0
        buf[out] = x
        out += 1
        i += 1
    # 3: contractions " 's", " 'm", " 're", " 've"
    n, out = out, 1
    for i in range(1, n):
        x = buf[i]
        if buf[i - 1] == space and x == quote and i + 1 < n:
            x1 = buf[i + 1]
            if x1 in b"sm":
                out -= 1
            elif x1 not in b"td" and i + 2 < n and bytes((x1, buf[i + 2])) in (b"re", b"ve"):
                out -= 1
        buf[out] = x
        out += 1
    return bytes(buf[:out])
