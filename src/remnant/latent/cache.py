"""Content-addressed cache for audit intermediates (UDS stage 1, fitted Jacobian lenses).

The key is the sha256 of the canonical JSON of everything the cached value depends on (model weight digests,
examples as ids, layers, τ, prompt format, …), so a stale entry can never be read back for changed inputs
(docs/latent.md: the reference keys its S1 cache on a config digest; we key on content, not on names).
JSON values are written atomically; tensors go to safetensors (never pickle).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from remnant.atomic import write_atomic
from remnant.registry import jsonable
from remnant.statement.canonical import canonical_sha256

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel


def digest_inputs(inputs: Any) -> str:
    """sha256 of the canonical JSON of ``inputs`` (sorted keys, no whitespace)."""
    return canonical_sha256(jsonable(inputs))


def model_digest(model: PreTrainedModel, given: str | None = None) -> str:
    """The weights digest of ``model``: ``given`` (e.g. ``ModelIdentity.digest``) or the in-memory state dict's."""
    if given:
        return given
    from remnant.models.identity import weights_digest_of

    return weights_digest_of(model)


class DigestCache:
    """A directory of ``KIND/KEY.json`` and ``KIND/KEY.safetensors`` entries."""

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root)

    def _path(self, kind: str, key: str, suffix: str) -> Path:
        return self.root / kind / f"{key}{suffix}"

    def get_json(self, kind: str, key: str) -> Any | None:
        path = self._path(kind, key, ".json")
        if not path.is_file():
            return None
        return json.loads(path.read_text(encoding="utf-8"))

    def put_json(self, kind: str, key: str, value: object) -> Path:
        path = self._path(kind, key, ".json")
        write_atomic(path, json.dumps(value, sort_keys=True, indent=1).encode("utf-8"))
        return path

    def get_tensors(self, kind: str, key: str) -> dict[str, torch.Tensor] | None:
        path = self._path(kind, key, ".safetensors")
        if not path.is_file():
            return None
        from safetensors.torch import load_file

        return dict(load_file(str(path)))

    def put_tensors(
        self, kind: str, key: str, tensors: dict[str, torch.Tensor], meta: dict[str, str]
    ) -> Path:
        from safetensors.torch import save

        path = self._path(kind, key, ".safetensors")
        data = {k: v.detach().contiguous().cpu() for k, v in tensors.items()}
        write_atomic(path, save(data, metadata=meta))
        return path


__all__ = ["DigestCache", "digest_inputs", "model_digest"]
