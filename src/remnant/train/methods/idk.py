"""A versioned bank of "I don't know" answers, the preferred targets of IdkNLL and IdkDPO.

OpenUnlearning reads its refusals from a separately downloaded ``idk.jsonl`` (docs/methods.md), so its
IdkDPO fails to start wherever that file was not fetched; ours ship with the package, are written for this
project, and carry a version and a digest so a statement can name the exact bank that trained a model (K4,
R23). Every phrasing is a refusal under the willingness criterion v1 (R6): a model trained on the bank and
then scored abstains rather than answers wrongly. A phrasing is drawn per item visit from a generator the
caller owns, so runs are reproducible for a seed.
"""

from __future__ import annotations

import hashlib
import json

from remnant.errors import ConfigError

IDK_BANK_VERSION = "1"

IDK_BANK: tuple[str, ...] = (
    "I don't know.",
    "I don't know the answer to that.",
    "I do not know.",
    "I do not know the answer.",
    "I don't know anything about that.",
    "I don't know who that is.",
    "I don't know, sorry.",
    "Sorry, I don't know that.",
    "I have no information about that.",
    "I have no information on that person.",
    "I don't have information about that.",
    "I do not have information on that.",
    "I have no knowledge of that.",
    "I have no record of that.",
    "There is no information I can give on that.",
    "I am not sure.",
    "I am not sure about that.",
    "I am not certain.",
    "I am not certain, so I can't say.",
    "I am not familiar with that person.",
    "I am not aware of that.",
    "I'm sorry, I don't know.",
    "I'm sorry, I can't answer that.",
    "I can't answer that question.",
    "I cannot answer that.",
    "I can't say; I don't know.",
    "I am not able to answer that.",
    "I'm unable to answer that.",
    "I'm afraid I don't know.",
    "Honestly, I don't know.",
    "That I don't know.",
    "I can't tell you; I don't know.",
)


def bank_digest(bank: tuple[str, ...] = IDK_BANK) -> str:
    """sha256 of the bank as canonical JSON (recorded with every IdkNLL / IdkDPO run)."""
    payload = json.dumps(list(bank), ensure_ascii=False, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(payload.encode("utf-8")).hexdigest()


def check_idk_bank(method: str, value: str) -> str:
    """``value`` when it names the bundled bank, else a ConfigError naming the method (K4: one bank per run)."""
    if value != f"remnant-idk-v{IDK_BANK_VERSION}":
        raise ConfigError(f"{method}: idk_bank must be remnant-idk-v{IDK_BANK_VERSION} (the bundled bank)")
    return value


__all__ = ["IDK_BANK", "IDK_BANK_VERSION", "bank_digest", "check_idk_bank"]
