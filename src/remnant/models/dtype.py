"""dtype policy: fp32 | bf16 | fp16 (fp16 only where the device supports it).

:data:`DTYPE_NAMES` is the one table of the policy's dtypes, by torch name; it needs no torch, so configs,
records and measurements read it without importing torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from remnant.errors import ModelError

if TYPE_CHECKING:
    import torch

#: The policy's dtypes: torch name (``torch.bfloat16`` without its module) → policy name.
DTYPE_NAMES = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}


def resolve_dtype(name: str, device: str) -> torch.dtype:
    """Map a dtype name to a torch dtype, refusing fp16 on CPU (slow and numerically unsafe there)."""
    import torch

    by_name = {policy: torch_name for torch_name, policy in DTYPE_NAMES.items()}
    if name not in by_name:
        raise ModelError(f"dtype {name!r} is not one of {sorted(by_name)}")
    if name == "fp16" and str(device).startswith("cpu"):
        raise ModelError("dtype 'fp16' is not supported on CPU; use 'fp32' or 'bf16'")
    dtype: torch.dtype = getattr(torch, by_name[name])
    return dtype


def dtype_name(dtype: torch.dtype | str) -> str:
    """The policy name of a torch dtype or its name (``torch.bfloat16`` → ``bf16``); a name outside the policy
    (``remnant eval --dtype`` spellings too) is kept without its ``torch.`` prefix (an identity records torch's)."""
    name = str(dtype).removeprefix("torch.")
    return DTYPE_NAMES.get(name, name)
