"""A repository's GGUF files as a person picks them: one entry per model file, a split model
(`name-00001-of-00003.gguf` ...) as one entry made of its parts, with the quantization read
from the name. Pure data; nothing here touches the network.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

SPLIT_NAME = re.compile(r"^(?P<base>.+)-(?P<index>\d{5})-of-(?P<count>\d{5})\.gguf$", re.IGNORECASE)
QUANT_NAME = re.compile(
    r"(?<![A-Za-z0-9])(IQ[1-4]_(?:XXS|XS|S|M|NL)|Q[2-8]_K(?:_[SML]|_XL)?|Q[4-8]_[01]|TQ[12]_0|MXFP4|BF16|F16|F32)"
    r"(?![A-Za-z0-9])",
    re.IGNORECASE,
)
NOT_MODELS = ("mmproj",)  # vision projectors: GGUF files that are not language models


@dataclass(frozen=True)
class HubPart:
    """One file in the repository."""

    path: str  # rfilename: the path inside the repository
    size: int  # bytes
    sha256: str | None  # from the Hub's LFS metadata; None when the Hub gives none


@dataclass(frozen=True)
class HubFile:
    """One model as a person picks it: a single file, or the parts of a split model in order."""

    name: str  # the file name, or for a split model its name without -0000k-of-0000n
    parts: tuple[HubPart, ...]
    quantization: str  # e.g. Q4_K_M, or "?" when the name does not say

    @property
    def size(self) -> int:
        return sum(p.size for p in self.parts)

    @property
    def split(self) -> bool:
        return len(self.parts) > 1

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "quantization": self.quantization,
            "size": self.size,
            "parts": [{"path": p.path, "size": p.size, "sha256": p.sha256} for p in self.parts],
        }


@dataclass(frozen=True)
class RepoFiles:
    """A repository at one commit: its GGUF models and what the card says about it."""

    repo_id: str
    revision: str  # the commit the files were listed at; downloads are pinned to it
    files: tuple[HubFile, ...]
    licence: str | None
    gated: bool
    incomplete: tuple[str, ...] = ()  # split models with parts missing (listed, not offered)

    def find(self, name: str) -> HubFile:
        """A file by its name, the path of its (first) part, or its base name."""
        for f in self.files:
            if name in (f.name, f.parts[0].path) or name == f.parts[0].path.rsplit("/", 1)[-1]:
                return f
        raise KeyError(name)


def quantization_of(name: str) -> str:
    found = QUANT_NAME.findall(name.rsplit("/", 1)[-1])
    return found[-1].upper() if found else "?"


def group_gguf_files(siblings: list[HubPart]) -> tuple[list[HubFile], list[str]]:
    """(models, names of incomplete split models) from a repository's files, largest quantization
    last as the Hub lists them (by name). Non-GGUF files and vision projectors are left out."""
    singles: list[HubFile] = []
    groups: dict[tuple[str, int], dict[int, HubPart]] = {}
    for p in siblings:
        base_name = p.path.rsplit("/", 1)[-1]
        if not base_name.lower().endswith(".gguf") or any(w in base_name.lower() for w in NOT_MODELS):
            continue
        m = SPLIT_NAME.match(p.path)
        if m and int(m["count"]) > 1:
            groups.setdefault((m["base"], int(m["count"])), {})[int(m["index"])] = p
        else:
            singles.append(HubFile(base_name, (p,), quantization_of(base_name)))
    incomplete = []
    for (base, count), parts in groups.items():
        name = base.rsplit("/", 1)[-1] + ".gguf"
        if sorted(parts) != list(range(1, count + 1)):
            incomplete.append(f"{name} ({len(parts)} of {count} parts)")
            continue
        singles.append(HubFile(name, tuple(parts[i] for i in range(1, count + 1)), quantization_of(name)))
    singles.sort(key=lambda f: f.parts[0].path.lower())
    return singles, incomplete


__all__ = ["HubPart", "HubFile", "RepoFiles", "group_gguf_files", "quantization_of"]
