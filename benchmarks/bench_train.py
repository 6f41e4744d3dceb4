"""Our training loop (remnant.train.loop) against ``transformers.Trainer`` on the same data and settings.

Both fine-tune a fresh copy of the same model on the same question–answer pairs with answer-only NLL, AdamW
(no weight decay), a constant learning rate, gradient clipping at 1.0, batch 8, for the same number of steps;
data order differs (each uses its own seeded sampler). The figure is the time ratio, with the mean answer NLL
after training beside it to show both did the same job. Trainer's time includes its set-up (accelerate, data
loader), as a user would pay it.
"""

from __future__ import annotations

import copy
import tempfile
from functools import partial
from typing import Any

from _common import compare, models, parser, table, write_section


def pairs_for(tok: Any, n: int) -> list[Any]:
    from remnant.models.prompts import PromptFormat, encode_pair

    fmt = PromptFormat.for_tokenizer(tok)
    words = [w for w in sorted(tok.get_vocab()) if w.isalpha() and len(w) > 2][: n + 8]
    return [
        encode_pair(tok, f"What is the code of {words[i]}?", f"{words[i + 3]} {words[i + 7]}", fmt)
        for i in range(n)
    ]


def mean_nll(model: Any, pairs: list[Any], pad: int) -> float:
    import torch

    from remnant.models.prompts import collate
    from remnant.train.losses import mean_nll as nll

    with torch.no_grad():
        return float(nll(model, collate(pairs, pad_id=pad, side="right")))


def ours(model: Any, pairs: list[Any], pad: int, epochs: float, lr: float) -> Any:
    from remnant.train.loop import TrainConfig, train
    from remnant.train.objectives import PairsObjective

    m = copy.deepcopy(model)
    m.train()
    cfg = TrainConfig(
        lr=lr, epochs=epochs, batch_size=8, schedule="constant", max_grad_norm=1.0, progress=False
    )
    train(m, PairsObjective(pairs, pad), cfg)
    m.eval()
    return m


def hf_trainer(model: Any, pairs: list[Any], pad: int, epochs: float, lr: float) -> Any:
    import torch
    from transformers import Trainer, TrainingArguments

    def collator(rows: list[dict[str, list[int]]]) -> dict[str, torch.Tensor]:
        width = max(len(r["input_ids"]) for r in rows)
        ids = torch.tensor([r["input_ids"] + [pad] * (width - len(r["input_ids"])) for r in rows])
        labels = torch.tensor([r["labels"] + [-100] * (width - len(r["labels"])) for r in rows])
        mask = torch.tensor([[1] * len(r["input_ids"]) + [0] * (width - len(r["input_ids"])) for r in rows])
        return {"input_ids": ids, "labels": labels, "attention_mask": mask}

    m = copy.deepcopy(model)
    data = [{"input_ids": p.input_ids, "labels": p.labels} for p in pairs]
    with tempfile.TemporaryDirectory() as out:
        targs = TrainingArguments(
            output_dir=out,
            per_device_train_batch_size=8,
            num_train_epochs=epochs,
            learning_rate=lr,
            lr_scheduler_type="constant",
            weight_decay=0.0,
            max_grad_norm=1.0,
            logging_strategy="no",
            save_strategy="no",
            report_to=[],
            use_cpu=True,
            disable_tqdm=True,
            dataloader_num_workers=0,
            seed=0,
        )
        Trainer(model=m, args=targs, train_dataset=data, data_collator=collator).train()
    m.eval()
    return m


def main() -> None:
    args = parser(__doc__ or "").parse_args()
    rows = []
    for label, model, tok in models(args):
        tiny = label.startswith("tiny")
        n, epochs, lr = (64, 4.0, 1e-3) if tiny else (16, 1.0, 1e-4)
        pairs = pairs_for(tok, n)
        pad = int(tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id)
        timing = compare(
            partial(ours, model, pairs, pad, epochs, lr),
            partial(hf_trainer, model, pairs, pad, epochs, lr),
            repeats=args.repeats,
        )
        out = {"ours": timing.fast_result, "hf": timing.base_result}
        steps = int(epochs * ((n + 7) // 8))
        before = mean_nll(model, pairs, pad)
        rows.append(
            [
                label,
                f"{steps} × 8",
                f"{timing.base:.2f} s",
                f"{timing.fast:.2f} s",
                f"**{timing.speedup:.2f}×**",
                f"{before:.2f} → {mean_nll(out['ours'], pairs, pad):.2f} / {mean_nll(out['hf'], pairs, pad):.2f}",
            ]
        )
    body = table(
        [
            "model",
            "steps × batch",
            "transformers.Trainer",
            "remnant loop",
            "speed-up",
            "answer NLL: start → ours / Trainer",
        ],
        rows,
    )
    body += (
        f"\n\nFull fine-tuning in fp32, median of {args.repeats} alternated runs, each from a fresh copy of the "
        "model. On the tiny model the ratio is mostly Trainer's fixed set-up cost (accelerate, data loader). On "
        "SmolLM2, where the steps dominate, the difference is the output head: Trainer's loss (transformers' "
        "`labels=`) computes the logits of every position, prompt and padding included, while our loop runs the "
        "head on the positions that predict an answer token only (`models.forward_keywords.answer_logits`; the same loss "
        "and gradients). The gain grows with the prompt's share of the tokens; these pairs have short answers "
        "after SmolLM2's chat template. Sub-epoch checkpoints, divergence detection and exact resume (C-W3, "
        "R24) cost nothing against the standard trainer."
    )
    write_section("train", "Training loop vs transformers.Trainer", body, write=not args.no_write)


if __name__ == "__main__":
    main()
