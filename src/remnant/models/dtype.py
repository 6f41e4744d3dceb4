"""dtype policy: fp32 | bf16 | fp16 (fp16 only where the device supports it)."""

from __future__ import annotations

import torch

from remnant.errors import ModelError

DTYPES: dict[str, torch.dtype] = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def resolve_dtype(name: str, device: str) -> torch.dtype:
    """Map a dtype name to a torch dtype, refusing fp16 on CPU (slow and numerically unsafe there)."""
    if name not in DTYPES:
        raise ModelError(f"dtype {name!r} is not one of {sorted(DTYPES)}")
    if name == "fp16" and str(device).startswith("cpu"):
        raise ModelError("dtype 'fp16' is not supported on CPU; use 'fp32' or 'bf16'")
    return DTYPES[name]


def dtype_name(dtype: torch.dtype) -> str:
    """The policy name of a torch dtype (or its str when outside the policy)."""
    for name, value in DTYPES.items():
        if value == dtype:
            return name
    return str(dtype)
