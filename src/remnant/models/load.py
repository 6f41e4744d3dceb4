"""Load causal LMs safely: safetensors folders and GGUF files only; pickles and remote code refused (R2).

Claimants' files are untrusted, so ``trust_remote_code`` is always False (there is no switch), and a model's
identity is what was loaded: the files are those :mod:`remnant.models.files` chose and checked, read from a
staging folder holding only them; a checkpoint missing, adding or misshaping any of the architecture's parameters
is refused (transformers would initialise missing ones at random: two loads, two models, one identity); tied
parameters are not missing; a chat template that cannot be rendered is refused at load time. A path that does not
exist is "no such model folder", never a hub id; only a string that can be nothing but ``org/name`` is resolved
through huggingface_hub (safetensors only). A PEFT LoRA adapter is applied and merged, so scoring sees one plain
model."""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from remnant.atomic import replace_dir
from remnant.errors import ModelError
from remnant.hub import is_hub_id
from remnant.models.dtype import resolve_dtype
from remnant.models.files import ADAPTER_DIR, ADAPTER_WEIGHTS, ModelFiles, model_files, staged
from remnant.models.identity import ModelIdentity, identify_files

#: How many missing / unexpected / mismatched parameter names a refusal lists before "and N more".
LISTED = 10

__all__ = ["ModelState", "hub_model", "load_model", "pinned_hub_model", "resolve_source", "save_model"]


@dataclass(frozen=True)
class ModelState:
    """A loaded model state (eval mode) with its tokenizer and content identity."""

    model: Any
    tokenizer: Any
    identity: ModelIdentity
    source: str


def resolve_source(source: str | Path) -> Path:
    """The path to load and whether it came from the hub. A ``Path`` (e.g. a config's ``folder``) is always a
    path; a string is a path when it exists, else a zoo name, else a hub id, else a missing folder."""
    path = Path(source).expanduser()
    if isinstance(source, Path) or os.path.lexists(path):
        return path
    from remnant.models import zoo

    name = str(source)
    if name in zoo.ZOO:
        cached = zoo.cached(name)
        return cached if cached is not None else zoo.fetch(name)
    if is_hub_id(name):
        return hub_model(name)
    raise ModelError(
        f"{path}: no such model folder (nor a .gguf file, a zoo name or a hub id)", requirement="R2"
    )


def hub_model(hub_id: str, revision: str | None = None) -> Path:
    """A hub model's local snapshot folder at ``revision`` (:func:`remnant.hub.snapshot`): safetensors, configs
    and tokenizer files only (R2); the one resolver behind a hub id anywhere (eval, configs, sweep specs)."""
    from remnant.hub import MODEL_PATTERNS, snapshot

    return snapshot(hub_id, repo_type="model", patterns=MODEL_PATTERNS, error=ModelError, revision=revision)


def pinned_hub_model(hub_id: str, revision: str | None, *, where: str) -> tuple[Path, dict[str, str | None]]:
    """:func:`hub_model` for a hub id a config or spec names: the snapshot folder, its files checked as a folder's are
    (R2), and the record that pins a re-run to it (id, revision, the snapshot's commit; R23, R24). A refusal is
    prefixed with ``where`` (the file and field that named the id, R2)."""
    from remnant.hub import snapshot_commit

    try:
        folder = hub_model(hub_id, revision)
        model_files(folder)
    except ModelError as exc:
        raise ModelError(f"{where}: {exc}", requirement=exc.requirement) from None
    return folder, {"hub": hub_id, "revision": revision or "main", "commit": snapshot_commit(folder)}


def _names(keys: Any) -> list[str]:
    """Parameter names from a loading-info entry (mismatched entries are (name, shape, shape) tuples)."""
    return sorted(str(k[0]) if isinstance(k, tuple) else str(k) for k in keys or ())


def _listed(names: list[str], what: str) -> str:
    """``N {what}: a, b, …`` naming at most :data:`LISTED` of ``names``."""
    more = f" and {len(names) - LISTED} more" if len(names) > LISTED else ""
    return f"{len(names)} {what}: {', '.join(names[:LISTED])}{more}"


def _check_loading_info(info: Mapping[str, object], folder: Path) -> None:
    """Refuse a checkpoint that does not fill the architecture exactly (module docstring; R2)."""
    problems = []
    for key, what in (
        ("missing_keys", "missing (they would be initialised at random)"),
        ("unexpected_keys", "unexpected (not parameters of the architecture)"),
        ("mismatched_keys", "of the wrong shape"),
    ):
        names = _names(info.get(key))
        if names:
            problems.append(_listed(names, f"parameter(s) {what}"))
    if problems:
        raise ModelError(
            f"{folder}: the checkpoint does not match its architecture: {'; '.join(problems)}",
            requirement="R2",
        )


@contextlib.contextmanager
def _quiet_transformers() -> Iterator[None]:
    """transformers' load report names the staging folder and repeats what the refusal says: keep it quiet."""
    from transformers.utils import logging as hf_logging

    before = hf_logging.get_verbosity()
    hf_logging.set_verbosity(logging.ERROR)
    try:
        yield
    finally:
        hf_logging.set_verbosity(before)


@contextlib.contextmanager
def _progress_bars(shown: bool) -> Iterator[None]:
    """Without progress (``--no-progress``), transformers' "Loading weights" bar and huggingface_hub's download
    bars are off for the load too. Both switches are process-wide, so their previous state is put back after."""
    if shown:
        yield
        return
    import importlib
    import warnings

    from transformers.utils import logging as hf_logging

    # the module (``huggingface_hub.utils.tqdm`` the attribute is its class): its per-group switches
    states = importlib.import_module("huggingface_hub.utils.tqdm").progress_bar_states
    hub_before = dict(states)
    transformers_before = hf_logging.is_progress_bar_enabled()
    with warnings.catch_warnings():
        # HF_HUB_DISABLE_PROGRESS_BARS=0 outranks this call; the hub would only warn that it does
        warnings.simplefilter("ignore")
        hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]  # also the hub's
    try:
        yield
    finally:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if transformers_before:
                hf_logging.enable_progress_bar()  # type: ignore[no-untyped-call]
        states.clear()
        states.update(hub_before)


def _read(files: ModelFiles, where: Path, torch_dtype: Any) -> tuple[Any, Any]:
    """Tokenizer and model from the staging folder ``where`` (loading info checked)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    common: dict[str, Any] = {"trust_remote_code": False}
    if files.gguf is not None:
        common["gguf_file"] = files.gguf
    tokenizer = AutoTokenizer.from_pretrained(where, **common)
    only_safetensors = {} if files.gguf is not None else {"use_safetensors": True}
    loaded: Any = AutoModelForCausalLM.from_pretrained(
        where,
        dtype=torch_dtype,
        output_loading_info=True,
        ignore_mismatched_sizes=True,
        **common,
        **only_safetensors,
    )
    model, info = loaded
    _check_loading_info(info, files.folder)
    if files.adapter:
        model = _apply_adapter(model, where / ADAPTER_DIR, files.folder)
    return tokenizer, model


def _apply_adapter(model: Any, adapter_dir: Path, folder: Path) -> Any:
    """The base ``model`` with the LoRA adapter staged in ``adapter_dir`` applied and merged (R2): every adapter
    tensor must land on a LoRA parameter of the base and every LoRA parameter must be given (a partial adapter
    would leave random LoRA weights behind one identity). A shape that does not fit the base raises in peft."""
    from peft import LoraConfig, get_peft_model, set_peft_model_state_dict
    from safetensors.torch import load_file

    config = LoraConfig.from_pretrained(str(adapter_dir))
    config.inference_mode = True
    # the base was read from the staging folder; naming it keeps peft from warning about a renamed base
    config.base_model_name_or_path = getattr(model, "name_or_path", None)
    peft_model = get_peft_model(model, config)
    result = set_peft_model_state_dict(peft_model, load_file(str(adapter_dir / ADAPTER_WEIGHTS)))
    unexpected = _names(getattr(result, "unexpected_keys", ()))
    missing = [k for k in _names(getattr(result, "missing_keys", ())) if "lora_" in k]
    for names, what in (
        (unexpected, "not LoRA parameters of the base"),
        (missing, "missing from the adapter"),
    ):
        if names:
            raise ModelError(
                f"{folder / ADAPTER_WEIGHTS}: {_listed(names, f'tensor(s) {what}')}", requirement="R2"
            )
    return peft_model.merge_and_unload()


def load_model(
    source: str | Path, *, dtype: str = "fp32", device: str = "cpu", progress: bool = True
) -> ModelState:
    """Load a folder (safetensors), a .gguf file, a zoo name or a hub id (:func:`resolve_source`; a ``Path`` is never a
    hub id) in eval mode, reading exactly the files :mod:`remnant.models.files` chose and checked (R2 identity).
    ``progress=False`` silences the libraries' progress bars for the download and the load."""
    from remnant.models.prompts import check_chat_template

    torch_dtype = resolve_dtype(dtype, device)  # a bad dtype is refused before any file is read
    with _progress_bars(progress):
        source_path = resolve_source(source)
    files = model_files(source_path)
    with staged(files) as where, _quiet_transformers(), _progress_bars(progress):
        try:
            tokenizer, model = _read(files, where, torch_dtype)
        except ModelError:
            raise
        except Exception as exc:  # one line naming the claimant's folder, not the staging folder
            message = " ".join(str(exc).replace(str(where), str(files.directory)).split())
            raise ModelError(f"{files.folder}: cannot load model: {message}", requirement="R2") from exc
    check_chat_template(tokenizer, files.folder)
    model.to(device)
    model.eval()
    identity = identify_files(files, model, tokenizer)
    return ModelState(model=model, tokenizer=tokenizer, identity=identity, source=str(files.folder))


def save_model(model: Any, tokenizer: Any, out_dir: str | Path, *, progress: bool = True) -> Path:
    """Write safetensors + tokenizer + config to a temp dir beside ``out_dir``, then rename it in place;
    ``progress=False`` keeps transformers' "Writing model shards" bar off."""

    def build(tmp: Path) -> None:
        with _progress_bars(progress):
            model.save_pretrained(tmp, safe_serialization=True)
        tokenizer.save_pretrained(tmp)

    return replace_dir(out_dir, build)
