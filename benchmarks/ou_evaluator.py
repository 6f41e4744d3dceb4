"""OpenUnlearning's own TOFU evaluator, run as a worker for bench_eval.py (never imported by remnant).

``PYTHON ou_evaluator.py --src THEIR_SRC --model DIR --data TOFU_DIR --metrics a,b --out DIR ...`` loads the
model once, composes their hydra config (``configs/eval.yaml`` with ``eval=tofu`` and the metrics asked for, as
their ``src/eval.py`` does), points every dataset at the local TOFU folder (``load_dataset("json")`` instead of
the Hub's ``locuslab/TOFU``), then answers stdin: each line ``run NAME`` evaluates once with their
``TOFUEvaluator`` into ``--out/NAME/`` (``TOFU_EVAL.json``, ``TOFU_SUMMARY.json``) and prints one line
``OU-DONE {"seconds": s, "logs": path}``; ``quit`` ends. Everything else they print goes to stderr.

PYTHON must have their evaluator's dependencies (omegaconf, hydra-core, datasets, scikit-learn, scipy,
rouge-score) and the same torch and transformers as remnant; only lm_eval is stubbed (ou_crosscheck.install_stubs).

Adapters, all outside their code, none changing a number:

- transformers 5's ``apply_chat_template(tokenize=True)`` returns a BatchEncoding where their pinned 4.45 returned
  the list of ids their ``preprocess_chat_instance`` indexes; the tokenizer given to them defaults
  ``return_dict=False``, 4.x's behaviour.
- transformers 5 ignores ``clean_up_tokenization_spaces=True`` (which their ROUGE decoding passes) for BPE
  tokenizers; 4.45 applied it. The tokenizer given to them opts back in, so their stored texts are those their
  pinned version wrote (remnant.metrics.text does the same clean-up).
- ``--pad-token`` replaces the tokenizer's pad token (both sides of the benchmark get the same): their collator
  masks every token equal to the pad id, so a model that pads with its end-of-turn token (SmolLM2) would have
  each in-sequence end-of-turn hidden from attention (docs/metrics.md, "Where numbers can still differ", 1).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def _as_transformers_4(tokenizer: Any) -> None:
    """``apply_chat_template`` returns a list of ids when tokenizing, and decoding honours an explicit
    ``clean_up_tokenization_spaces=True`` for BPE tokenizers too, as in transformers 4.x."""
    tokenizer.clean_up_tokenization_spaces_for_bpe_even_though_it_will_corrupt_output = True
    original = tokenizer.apply_chat_template

    def apply(*args: Any, **kwargs: Any) -> Any:
        kwargs.setdefault("return_dict", False)
        return original(*args, **kwargs)

    tokenizer.apply_chat_template = apply


def _local_data(node: Any, data: Path) -> None:
    """Point every ``hf_args`` below ``node`` at ``data/NAME.json`` (their TOFU configs name the Hub dataset)."""
    from omegaconf import DictConfig, open_dict  # type: ignore[import-not-found]

    if not isinstance(node, DictConfig):
        return
    for key in list(node.keys()):
        value = node[key]
        if key == "hf_args" and isinstance(value, DictConfig):
            name = str(value["name"])
            with open_dict(value):
                value["path"] = "json"
                value["data_files"] = str(data / f"{name}.json")
                del value["name"]
        else:
            _local_data(value, data)


def _config(args: argparse.Namespace) -> Any:
    from hydra import compose, initialize_config_dir  # type: ignore[import-not-found]
    from omegaconf import OmegaConf, open_dict

    configs = Path(args.src).resolve().parent / "configs"
    overrides = [
        "eval=tofu",
        # the group's key in their defaults list carries its package (tofu.yaml's tofu_metrics under eval.tofu)
        f"eval/tofu_metrics@eval.tofu.tofu_metrics=[{','.join(args.metrics)}]",
        f"eval.tofu.batch_size={args.batch_size}",
        f"eval.tofu.forget_split={args.forget_split}",
        f"eval.tofu.holdout_split={args.holdout_split}",
        "eval.tofu.overwrite=true",
    ]
    with initialize_config_dir(config_dir=str(configs), version_base=None):
        cfg = compose(config_name="eval.yaml", overrides=overrides)
    tofu = cfg.eval.tofu
    with open_dict(tofu):
        tofu.output_dir = str(args.out)
    for metric in tofu.metrics.values():
        if "generation_args" in metric:
            metric.generation_args.max_new_tokens = args.max_new_tokens
    _local_data(tofu.metrics, Path(args.data).resolve())
    OmegaConf.resolve(cfg.eval)
    return cfg


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--src", required=True, help="their src/ folder")
    p.add_argument("--model", required=True)
    p.add_argument("--data", required=True, help="a TOFU-format folder of JSON-lines splits")
    p.add_argument("--metrics", required=True, type=lambda s: s.split(","))
    p.add_argument("--out", required=True, type=Path)
    p.add_argument("--template-args", required=True, help="their model config's template_args, as JSON")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--max-new-tokens", type=int, default=200)
    p.add_argument("--forget-split", default="forget10")
    p.add_argument("--holdout-split", default="holdout10")
    p.add_argument("--pad-token", help="replace the tokenizer's pad token (the same on both sides)")
    p.add_argument("--threads", type=int, default=1)
    return p


def main() -> None:
    args = _parser().parse_args()
    reply = sys.stdout
    sys.stdout = sys.stderr  # their metrics print progress; stdout carries only the OU-DONE lines
    sys.path.insert(0, str(ROOT / "tests" / "unit" / "metrics"))
    from ou_crosscheck import install_stubs  # type: ignore[import-not-found]

    install_stubs(args.src, their_deps=False)
    import torch
    from omegaconf import OmegaConf
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.set_num_threads(args.threads)
    from evals import get_evaluators  # type: ignore[import-not-found]

    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32)  # their get_model, on CPU
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    if args.pad_token is not None:
        tokenizer.pad_token = args.pad_token
    _as_transformers_4(tokenizer)
    cfg = _config(args)
    template_args = OmegaConf.create(json.loads(args.template_args))
    print("OU-READY", file=reply, flush=True)
    for line in sys.stdin:
        command = line.split()
        if not command or command[0] == "quit":
            break
        out = args.out / command[1]
        evaluator = get_evaluators(cfg.eval)["tofu"]  # fresh, as each run of their eval.py builds it
        start = time.perf_counter()
        evaluator.evaluate(
            model=model, tokenizer=tokenizer, template_args=template_args, output_dir=str(out), overwrite=True
        )
        seconds = time.perf_counter() - start
        logs = out / "TOFU_EVAL.json"
        print("OU-DONE " + json.dumps({"seconds": seconds, "logs": str(logs)}), file=reply, flush=True)


if __name__ == "__main__":
    main()
