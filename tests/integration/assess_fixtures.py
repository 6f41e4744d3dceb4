"""Helpers for the assessment integration tests: a tiny Class D pack and a config that runs in seconds on the
tiny random Llama (tests/fixtures_models.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

TINY_CONFIG = """
class = "D"
track = "W"
preset = "quick"
gating_metric = "kappa"
gating_justification = "Minted canary attributes have exact ground truth (R7)."
tau = 0.5
min_n = 4

[claim]
statement = "The forget-set canaries were erased from the tiny model."
target = "Canary attributes of the forget-set entities"
model = "tiny-llama test model"
process = "Gradient ascent on the removal split"
audience = "The test suite"

[target]
pack = "{pack}"

[models]
dtype = "float32"
device = "cpu"

[models.control]
folder = "{control}"

[models.pre_removal.install]
max_epochs = 1
lr = 1e-3
target_kappa = 0.9
batch_size = 16

[models.post_removal]
{post}

[utility]
metrics = ["retain_kappa"]
phi = 0.5
deployment = "A test deployment"

[utility.params.retain_kappa]
max_new_tokens = 8

[probe]
splits = ["probe"]
max_n = 6

[attacks.relearning]
budgets = [4, 8]
lr = 1e-3
max_epochs = 1
first_epoch_checkpoints = [0.5]
batch_size = 2
params = {{ max_new_tokens = 8 }}

[attacks.prefill]
params = {{ max_new_tokens = 8 }}

[attacks.many_shot]
params = {{ shots = 2, max_new_tokens = 8 }}

[attacks.repeated_sampling]
params = {{ implementation = "repeated_sampling_analytic", n_samples = 8, ks = [1, 8] }}

[seeds]
master = 7

[class_d]
insignificance_threshold = 0.05
justification = "A test threshold."
{signing}
"""

GRAD_ASCENT = 'method = "grad_ascent"\nparams = { lr = 1e-4, epochs = 1, batch_size = 16, grad_accum = 1, warmup_epochs = 0.0 }'


def tiny_pack(directory: Path) -> Path:
    """A Class D pack small enough for the tiny model: 8 installed entities (2 probed, 2 relearned)."""
    from remnant.packs import ClassDSpec, mint_class_d, write_pack

    if not (directory / "pack.json").is_file():
        write_pack(mint_class_d(ClassDSpec(entities=8, controls=1, seed=3, general=False)), directory)
    return directory


def write_config(
    path: Path, *, pack: Path, control: Path, post: str = GRAD_ASCENT, key: Path | None = None, **extra: Any
) -> Path:
    """Write the tiny config with each ``extra`` key (a piece of its text) replaced by its value.

    A key that is not in the text raises, so a test's replacement cannot silently miss after a config edit.
    """
    signing = f'\n[signing]\nkey = "{key}"\n' if key is not None else ""
    text = TINY_CONFIG.format(pack=pack, control=control, post=post, signing=signing)
    for old, new in extra.items():
        if old not in text:
            raise ValueError(f"write_config: {old!r} is not in the config text")
        text = text.replace(old, new)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def write_hub_config(path: Path, *, pack: Path, control: str) -> Path:
    """The tiny config with ``control`` (e.g. ``hub = "org/name"``) as its ``[models.control]`` table (R2, R3)."""
    config = write_config(path, pack=pack, control=Path("unused"))
    text = config.read_text(encoding="utf-8")
    table = '[models.control]\nfolder = "unused"'
    if table not in text:
        raise ValueError("write_hub_config: the config's control table changed")
    config.write_text(text.replace(table, f"[models.control]\n{control}"), encoding="utf-8")
    return config
