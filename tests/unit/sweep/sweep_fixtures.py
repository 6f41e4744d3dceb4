"""Tiny pools for the sweep tests: specs on the test suite's tiny random Llama, and a record comparison.

The tiny pool has three models (the full install, a retain-only install and one NPO removal), two perturbations
(none and NF4; relearning where a test asks for it) and four measurements (two field metrics, κ on P, retain κ,
UDS), so a whole sweep runs in seconds.
"""

from __future__ import annotations

from pathlib import Path

TINY_METHODS = """
[[removal.methods]]
name = "npo"
params = { epochs = 1, batch_size = 4, grad_accum = 1, warmup_epochs = 0.0 }
grid = { lr = [1e-3] }
"""


def tiny_spec(
    model_dir: Path,
    store: Path,
    *,
    relearn: bool = False,
    extra: str = "",
    methods: str = TINY_METHODS,
    retries: int = 1,
    name: str = "tiny",
) -> str:
    """A generated spec over the tiny model (module docstring); ``extra`` TOML is appended."""
    return f"""
kind = "generated"
name = "{name}"
include_base = false

[base]
model = "{model_dir}"

[pack]
mint = {{ entities = 8, controls = 2, seed = 3, general = false, truth_ratio_options = true }}
attributes = ["home_town"]

[install]
max_epochs = 1
lr = 1e-3
batch_size = 8

[removal]
seeds = [0]
{methods}
[perturbations]
nf4 = true

[perturbations.relearn]
enabled = {"true" if relearn else "false"}
batch_size = 4
grad_accum = 1

[suite]
metrics = ["forget_Q_A_Prob", "forget_truth_ratio"]
audits = ["uds"]
max_new_tokens = 4

[resources]
store = "{store}"
retries = {retries}
{extra}
"""


def write_spec(folder: Path, text: str, name: str = "spec.toml") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(text)
    return path


def comparable(path: Path) -> set[str]:
    """Cell records and observations of a store, without what differs between two equal runs (timings)."""
    from remnant.sweep.compare import comparable_records

    return comparable_records(path)
