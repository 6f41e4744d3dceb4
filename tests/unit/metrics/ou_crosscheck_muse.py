"""Cross-check remnant's MUSE suite against OpenUnlearning's own data and metric code; run in a subprocess by
test_metrics_openunlearning.py: ``python ou_crosscheck_muse.py OU_SRC MODEL_DIR REF_DIR`` prints one line
``CROSSCHECK {json}`` (per metric: both aggregates and the largest difference anywhere in the two entries).

Unlike ou_crosscheck.py (TOFU), their side here builds its own items: their ``QADataset`` (in-context examples,
``predict_with_generate``) and ``CompletionDataset`` read muse_data.py's rows through a stand-in for
``datasets.load_dataset``, with the arguments of their MUSE data and metric configs at d3d7cf9 and the template
arguments of their Llama-2-7b-hf model config. Their code only runs here (MIT licence); nothing of it is copied.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from ou_crosscheck import DictConfig, install_stubs, max_diff

#: configs/model/Llama-2-7b-hf.yaml template_args (their MUSE runs).
TEMPLATE = {
    "apply_chat_template": False,
    "user_start_tag": "Question: ",
    "user_end_tag": "\n",
    "asst_start_tag": "Answer: ",
    "asst_end_tag": "\n\n",
}
STOPWORDS = ["\n\n", "\nQuestion", "Question:"]


class FakeDataset:
    """What their datasets code touches of a ``datasets.Dataset``: rows by index, columns by name, add_column."""

    def __init__(self, rows: list[dict[str, Any]]) -> None:
        self.rows = [dict(r) for r in rows]

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, key: Any) -> Any:
        return [r[key] for r in self.rows] if isinstance(key, str) else self.rows[key]

    def add_column(self, name: str, values: Any) -> FakeDataset:
        return FakeDataset([{**r, name: int(v)} for r, v in zip(self.rows, values, strict=True)])


def _datasets(tok: Any) -> dict[str, Any]:
    """Their MUSE datasets, each as its metric config builds it."""
    import data.pretraining as pretraining  # type: ignore[import-not-found]
    import data.qa as qa  # type: ignore[import-not-found]
    from muse_data import MUSE

    def load(path: str, **kw: Any) -> FakeDataset:
        return FakeDataset(MUSE[path])

    qa.load_hf_dataset = pretraining.load_hf_dataset = load

    def knowmem(split: str) -> Any:
        return qa.QADataset(
            {"path": f"knowmem/{split}"}, TEMPLATE, tok, "question", "answer",
            few_shot_dataset_hf_args={"path": f"knowmem/{split}_icl"}, max_length=512, predict_with_generate=True,
        )  # fmt: skip

    def completion(path: str, text_key: str, **kw: Any) -> Any:
        return pretraining.CompletionDataset(
            {"path": path}, TEMPLATE, tok, prefix_key="prompt", text_key=text_key, max_length=2048, **kw
        )

    return {
        "forget_knowmem": knowmem("forget_qa"),
        "retain_knowmem": knowmem("retain_qa"),
        "verbmem_generate": completion("verbmem/forget", "gt", predict_with_generate=True, insert_space=True),
        "verbmem": completion("verbmem/forget", "gt", insert_space=True),
        "mia": {
            "forget": completion("privleak/forget", "text"),
            "holdout": completion("privleak/holdout", "text"),
        },
    }


def _theirs(model: Any, ref: Any, tok: Any) -> dict[str, Any]:
    from data.collators import DataCollatorForSupervisedDataset  # type: ignore[import-not-found]
    from evals.metrics import memorization as mem  # type: ignore[import-not-found]
    from evals.metrics import mia, privacy
    from evals.metrics.mia.reference import ReferenceAttack  # type: ignore[import-not-found]
    from evals.metrics.mia.utils import mia_auc  # type: ignore[import-not-found]

    coll = DataCollatorForSupervisedDataset(tok, padding_side="right", index="index")
    left = DataCollatorForSupervisedDataset(tok, padding_side="left", index="index")
    ds = _datasets(tok)

    def rouge(data: Any, max_new: int, stop: list[str] | None) -> Any:
        gen = DictConfig(
            do_sample=False, top_p=None, temperature=None, max_new_tokens=max_new, use_cache=True
        )
        if stop is not None:
            gen["stopwords"] = stop
        return mem.rouge._metric_fn(
            model,
            tokenizer=tok,
            data=data,
            collators=left,
            batch_size=4,
            generation_args=gen,
            rouge_type="rougeL_f1",
        )

    t: dict[str, Any] = {
        "forget_knowmem_ROUGE": rouge(ds["forget_knowmem"], 32, STOPWORDS),
        "retain_knowmem_ROUGE": rouge(ds["retain_knowmem"], 32, STOPWORDS),
        "forget_verbmem_ROUGE": rouge(ds["verbmem_generate"], 128, None),
    }
    for name in ("extraction_strength", "exact_memorization"):
        t[name] = getattr(mem, name)._metric_fn(model, data=ds["verbmem"], collators=coll, batch_size=3)
    kw: dict[str, Any] = {"data": ds["mia"], "collators": coll, "batch_size": 3}
    t["mia_loss"] = mia.mia_loss._metric_fn(model, **kw)
    t["mia_min_k"] = mia.mia_min_k._metric_fn(model, k=0.4, **kw)
    t["mia_min_k_plus_plus"] = mia.mia_min_k_plus_plus._metric_fn(model, k=0.4, **kw)
    t["mia_zlib"] = mia.mia_zlib._metric_fn(model, tokenizer=tok, **kw)
    t["mia_gradnorm"] = mia.mia_gradnorm._metric_fn(model, data=ds["mia"], collators=coll, batch_size=1, p=2)
    model.eval()
    model.zero_grad(set_to_none=True)
    t["mia_reference"] = mia_auc(ReferenceAttack, model, ds["mia"], coll, 3, reference_model=ref)
    t["privleak"] = privacy.privleak._metric_fn(model, pre_compute={"forget": t["mia_min_k"]}, ref_value=0.5)
    return t


def main() -> None:
    install_stubs(sys.argv[1])
    import torch

    torch.set_num_threads(1)
    from muse_data import MUSE

    from remnant.metrics.encoding import OpenUnlearningPrompt
    from remnant.metrics.evaluate import EvalSettings, evaluate
    from remnant.models.load import load_model

    state, ref = load_model(sys.argv[2]), load_model(sys.argv[3])
    theirs = _theirs(state.model, ref.model, state.tokenizer)
    ours = evaluate(
        state,
        MUSE.__getitem__,
        list(theirs),
        prompt=OpenUnlearningPrompt(apply_chat_template=False, system_prompt=None),
        settings=EvalSettings(suite="muse", batch_size=4),
        reference=ref,
    )
    report = {
        name: {
            "theirs": float(t["agg_value"]),
            "ours": ours.logs[name].agg_value,
            "max_diff": max_diff(ours.logs[name].to_json(), t, name),
        }
        for name, t in theirs.items()
    }
    print("CROSSCHECK " + json.dumps(report))


if __name__ == "__main__":
    main()
