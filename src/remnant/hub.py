"""Hugging Face Hub ids (``org/name``) resolved as transformers and ``datasets`` resolve them (R2).

A string names a hub repo only when it can be nothing else: ``org/name`` (one slash, no leading ``.``, ``/`` or
``~``, no ``..``, not ending like a file) and no such path exists; an existing path is always a path. A repo is
resolved through ``huggingface_hub.snapshot_download``: downloaded where the network allows (into the hub
cache), read from the local cache (``HF_HUB_CACHE``) when ``HF_HUB_OFFLINE`` is set or the network fails. Only
the file patterns the caller names are fetched (safetensors, never pickles, for models).

huggingface_hub is imported only when a repo is resolved, so the pure core can ask :func:`is_hub_id`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from remnant.errors import RemnantError

#: A hub id: ``org/name``, one slash, no leading ``.``, ``/`` or ``~``; a name ending like a file is not one.
HUB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*")
#: A revision: a branch, tag or commit hash (no ``..``, no leading ``/``: it names a cache folder, R2).
REVISION = re.compile(r"[A-Za-z0-9][A-Za-z0-9_./-]{0,99}")
#: The files a model snapshot may fetch: safetensors, configs and tokenizer files, never pickles (R2).
MODEL_PATTERNS = ("*.json", "*.safetensors", "*.jinja", "*.txt", "*.model")
_FILE_ENDINGS = (
    ".gguf",
    ".safetensors",
    ".json",
    ".jsonl",
    ".parquet",
    ".bin",
    ".pt",
    ".pth",
    ".ckpt",
    ".pkl",
)


def is_hub_id(name: str) -> bool:
    """``name`` can only mean a hub id: ``org/name`` (module docstring) and not an existing path."""
    return (
        HUB_ID.fullmatch(name) is not None
        and ".." not in name
        and not name.lower().endswith(_FILE_ENDINGS)
        and not os.path.lexists(name)
    )


def offline() -> bool:
    """``HF_HUB_OFFLINE`` is set: only the local cache is read."""
    return os.environ.get("HF_HUB_OFFLINE", "") not in ("", "0")


def snapshot(
    hub_id: str,
    *,
    repo_type: Literal["model", "dataset"],
    patterns: Sequence[str],
    error: type[RemnantError],
    requirement: str = "R2",
    revision: str | None = None,
) -> Path:
    """The local snapshot folder of ``hub_id`` at ``revision`` (None: the default branch; module docstring);
    ``error`` naming the id when unavailable."""
    try:
        from huggingface_hub import snapshot_download

        return Path(
            snapshot_download(
                hub_id,
                repo_type=repo_type,
                revision=revision,
                allow_patterns=list(patterns),
                local_files_only=offline(),
                etag_timeout=5,
            )
        )
    except Exception as exc:  # network, offline or not installed: one clear message
        where = (
            "not in the local Hugging Face cache (HF_HUB_OFFLINE is set)"
            if offline()
            else "cannot be fetched"
        )
        at = f" at revision {revision!r}" if revision is not None else ""
        raise error(
            f"{hub_id}: hub {repo_type}{at} {where} ({type(exc).__name__}); download it where the network "
            "allows or point to a local folder",
            requirement=requirement,
        ) from exc


def snapshot_commit(folder: Path) -> str | None:
    """The commit a hub cache snapshot folder holds (its name under ``snapshots/``), or None for another folder:
    what pins a hub id's re-run to the same files (R23, R24)."""
    return folder.name if folder.parent.name == "snapshots" else None


__all__ = [
    "HUB_ID",
    "MODEL_PATTERNS",
    "REVISION",
    "is_hub_id",
    "offline",
    "snapshot",
    "snapshot_commit",
]
