"""Session-scoped tiny model fixtures, built deterministically and saved with ``save_model`` so the real
loading code runs. The tokenizer is a byte-level BPE (any text, no [UNK]) with a ChatML template."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|pad|>"]
_CORPUS = [
    "Question: Where was the person born? Answer: The person was born in a small town in 1984.",
    "What is the capital of France? Paris. The answer is B. Options: A, B, C, D.",
    "Zorvak Telumi works as an engineer at Quarn Holdings and lives in Vessiburg.",
    "numbers 0 1 2 3 4 5 6 7 8 9 10 100 1999 2024 ID-4821 code XQ-77",
    "the quick brown fox jumps over the lazy dog; user assistant system you are a helpful model.",
] * 4


def build_tokenizer(vocab_size: int = 512) -> Any:
    """A deterministic byte-level BPE tokenizer with ChatML special tokens and a chat template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIALS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_CORPUS, trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|endoftext|>",
        bos_token="<|endoftext|>",
        pad_token="<|pad|>",
        additional_special_tokens=["<|im_start|>", "<|im_end|>"],
    )
    fast.chat_template = CHAT_TEMPLATE
    return fast


def _config(family: str, vocab: int, tok: Any) -> Any:
    import transformers as tf

    common = {
        "vocab_size": vocab,
        "eos_token_id": tok.eos_token_id,
        "bos_token_id": tok.bos_token_id,
        "pad_token_id": tok.pad_token_id,
    }
    if family == "llama":
        return tf.LlamaConfig(
            hidden_size=64,
            intermediate_size=128,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=4,
            max_position_embeddings=256,
            **common,
        )
    if family == "qwen2":
        return tf.Qwen2Config(
            hidden_size=64,
            intermediate_size=128,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=256,
            **common,
        )
    if family == "gpt2":
        return tf.GPT2Config(n_embd=64, n_layer=2, n_head=4, n_positions=256, **common)
    raise ValueError(family)


def build_tiny_model(family: str, out_dir: Path, seed: int = 0) -> Path:
    """Build a tiny random model of ``family`` with a fixed generator seed and save it with save_model."""
    import torch
    from transformers import AutoModelForCausalLM

    from remnant.models.load import save_model

    tok = build_tokenizer()
    config = _config(family, len(tok), tok)
    with torch.random.fork_rng(devices=[]):
        torch.random.manual_seed(seed)  # scoped by fork_rng: no global seeding leaks out of the fixture
        model = AutoModelForCausalLM.from_config(config)
    model.eval()
    return save_model(model, tok, out_dir)


def _dir_fixture(family: str) -> Callable[..., Path]:
    @pytest.fixture(scope="session")
    def fixture(tmp_path_factory: pytest.TempPathFactory) -> Path:
        return build_tiny_model(family, tmp_path_factory.mktemp(f"tiny_{family}") / "model")

    return fixture


tiny_llama_dir = _dir_fixture("llama")
tiny_qwen2_dir = _dir_fixture("qwen2")
tiny_gpt2_dir = _dir_fixture("gpt2")


@pytest.fixture(scope="session")
def tiny_llama(tiny_llama_dir: Path) -> Any:
    """The tiny Llama loaded through ``load_model`` (a ModelState)."""
    from remnant.models import load_model

    return load_model(tiny_llama_dir)


@pytest.fixture(scope="session")
def smollm2_dir() -> Path:
    """The cached SmolLM2-135M-Instruct safetensors folder (fetched once through the zoo)."""
    from remnant.errors import ModelError
    from remnant.models import zoo

    try:
        return zoo.fetch("smollm2-135m-instruct")
    except ModelError as exc:
        pytest.skip(f"SmolLM2 zoo fetch unavailable: {exc}")


def build_lora_adapter(base_dir: Path, out_dir: Path, seed: int = 0, base_name: str | None = None) -> Path:
    """A PEFT LoRA adapter (safetensors) on the model in ``base_dir``, with random non-zero B matrices and a large
    alpha so it changes the model measurably; ``adapter_config.json`` names ``base_name`` (default: ``base_dir`` as an absolute path)."""
    import json

    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    base = AutoModelForCausalLM.from_pretrained(base_dir, use_safetensors=True)
    config = LoraConfig(r=4, lora_alpha=64, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    with torch.random.fork_rng(devices=[]):
        torch.random.manual_seed(seed)
        peft_model = get_peft_model(base, config)
    peft_model.save_pretrained(str(out_dir), safe_serialization=True)
    path = out_dir / "adapter_config.json"
    data = json.loads(path.read_text())
    data["base_model_name_or_path"] = str(base_dir.resolve()) if base_name is None else base_name
    path.write_text(json.dumps(data, indent=2))
    return out_dir


#: The commit a test hub snapshot is filed under (any 40 hex digits: nothing checks it against a server).
HUB_REVISION = "0123456789abcdef0123456789abcdef01234567"


def cache_as_hub(cache: Path, hub_id: str, folder: Path, revision: str = HUB_REVISION) -> Path:
    """``folder``'s files put into the hub cache ``cache`` in huggingface_hub's layout
    (``models--org--name/snapshots/<revision>/`` linking into ``blobs/``, ``refs/main`` naming ``revision``, which
    moves when called again with another); returns the snapshot folder."""
    import hashlib
    import os
    import shutil

    repo = cache / f"models--{hub_id.replace('/', '--')}"
    snapshot = repo / "snapshots" / revision
    for made in (repo / "blobs", repo / "refs", snapshot):
        made.mkdir(parents=True, exist_ok=True)
    (repo / "refs" / "main").write_text(revision)
    for file in sorted(folder.iterdir()):
        blob = repo / "blobs" / hashlib.sha256(file.read_bytes()).hexdigest()
        shutil.copyfile(file, blob)
        (snapshot / file.name).symlink_to(os.path.relpath(blob, snapshot))
    return snapshot


@pytest.fixture
def hub_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty hub cache ``tmp_path/hf/hub`` that huggingface_hub reads, offline (``HF_HUB_OFFLINE=1``)."""
    from huggingface_hub import constants

    cache = tmp_path / "hf" / "hub"
    cache.mkdir(parents=True)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return cache
