"""The dataset card (``README.md``) written into every TOFU-format export, so ``datasets`` reads it (R2).

``datasets.load_dataset(folder, name="forget10")`` (how OpenUnlearning loads TOFU) finds a folder's configs in its
card's YAML ``configs:`` header; without one, a folder of JSON-lines files is one config of one split. The header
is written by hand, every string a JSON string (valid YAML), so no name can break out of its field."""

from __future__ import annotations

import json
from collections.abc import Mapping

CARD_FILE = "README.md"
#: The split name OpenUnlearning asks ``load_dataset`` for (``split="train"``), as the TOFU Hub repo has it.
HUB_SPLIT = "train"


def dataset_card(configs: Mapping[str, str], *, title: str, body: str) -> str:
    """A card whose header maps each config name to its one data file (relative path), split ``train``."""
    lines = ["---", "configs:"]
    for name, path in configs.items():
        lines += [
            f"- config_name: {json.dumps(name)}",
            "  data_files:",
            f"  - split: {HUB_SPLIT}",
            f"    path: {json.dumps(path)}",
        ]
    lines += ["---", "", f"# {title}", "", body.strip(), ""]
    return "\n".join(lines)


__all__ = ["CARD_FILE", "HUB_SPLIT", "dataset_card"]
