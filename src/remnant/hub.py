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
) -> Path:
    """The local snapshot folder of ``hub_id`` (module docstring); ``error`` naming the id when unavailable."""
    try:
        from huggingface_hub import snapshot_download

        return Path(
            snapshot_download(
                hub_id,
                repo_type=repo_type,
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
        raise error(
            f"{hub_id}: hub {repo_type} {where} ({type(exc).__name__}); download it where the network allows "
            "or point to a local folder",
            requirement=requirement,
        ) from exc


__all__ = ["HUB_ID", "is_hub_id", "offline", "snapshot"]
