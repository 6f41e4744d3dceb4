"""Cross-check remnant.metrics against OpenUnlearning's own metric code; run in a subprocess by
test_metrics_openunlearning.py: ``python ou_crosscheck.py OU_SRC MODEL_DIR REF_DIR`` prints one line
``CROSSCHECK {json}`` holding, per metric, both aggregates and the largest difference anywhere in the two entries.

Their package needs omegaconf, datasets, sklearn and lm_eval at import; the stubs below stand in (their metric
functions use none of them on this path, and roc_auc_score is a pairwise count). Their collator and metric
functions get our encodings, which test_metrics_encoding.py checks against their preprocessing. Their code is
only run here and in benchmarks/ou_evaluator.py (MIT licence); nothing of it is copied into remnant.

:func:`install_stubs` and :func:`max_diff` are shared with benchmarks/ou_evaluator.py and bench_eval.py, which run
their whole evaluator (hydra configs, datasets) under an interpreter that has their real dependencies.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import json
import sys
import types
from pathlib import Path
from typing import Any


def _stub(name: str, **attrs: Any) -> None:
    module = types.ModuleType(name)
    module.__spec__ = importlib.machinery.ModuleSpec(name, None)
    module.__dict__.update(attrs)
    sys.modules[name] = module


class DictConfig(dict):  # type: ignore[type-arg]
    """omegaconf's DictConfig, as far as their metric code uses it."""


class OmegaConf:
    @staticmethod
    def to_container(cfg: Any, resolve: bool = True, **kw: Any) -> dict[str, Any]:
        return dict(cfg)


def _roc_auc_score(labels: Any, scores: Any) -> float:
    neg = [s for lab, s in zip(labels, scores, strict=True) if lab == 0]
    pos = [s for lab, s in zip(labels, scores, strict=True) if lab == 1]
    return float(sum((p > n) + 0.5 * (p == n) for n in neg for p in pos) / (len(neg) * len(pos)))


def install_stubs(ou_src: str, *, their_deps: bool = True) -> None:
    """Put their ``src/`` (and this folder and the repository root) first on ``sys.path`` and stub what their
    package imports but the path run here never calls: lm_eval always (their LM-Eval evaluator), and with
    ``their_deps`` also omegaconf, datasets and sklearn (their evaluator proper needs the real ones)."""
    if their_deps:
        _stub("omegaconf", DictConfig=DictConfig, OmegaConf=OmegaConf)
        _stub("datasets", load_dataset=None)
        _stub("sklearn")
        _stub("sklearn.metrics", roc_auc_score=_roc_auc_score)
    _stub("lm_eval", simple_evaluate=None)
    _stub("lm_eval.models")
    _stub("lm_eval.models.hf_vlms", HFLM=None)
    _stub("lm_eval.tasks", TaskManager=None)
    here = Path(__file__).resolve().parent
    sys.path[:0] = [ou_src, str(here), str(here.parents[1])]


def _items(tok: Any, setting: Any, rows: Any, key: str, generate: bool = False) -> list[Any]:
    import torch

    from remnant.metrics.encoding import encode_qa

    def one(question: str, answer: str, index: int) -> dict[str, Any]:
        e = encode_qa(tok, setting, question, answer)
        if generate:  # their predict_with_generate item: the prompt, and labels = the whole sequence
            ids, labels = list(e.prompt_ids), list(e.full_ids)
        else:
            ids, labels = list(e.full_ids), [-100] * e.label_start + list(e.full_ids[e.label_start :])
        return {
            "input_ids": torch.tensor(ids),
            "labels": torch.tensor(labels),
            "attention_mask": torch.ones(len(ids)),
            "index": index,
        }

    out: list[Any] = []
    for i, r in enumerate(rows):
        answers = getattr(r, key)
        if isinstance(answers, str):
            out.append(one(r.question, answers, i))
        else:
            out.append({j: one(r.question, a, i) for j, a in enumerate(answers)})
    return out


def _theirs(model: Any, ref: Any, tok: Any, setting: Any, splits: Any) -> dict[str, Any]:
    from data.collators import DataCollatorForSupervisedDataset  # type: ignore[import-not-found]
    from evals.metrics import memorization as mem  # type: ignore[import-not-found]
    from evals.metrics import mia, privacy
    from evals.metrics.mia.reference import ReferenceAttack  # type: ignore[import-not-found]
    from evals.metrics.mia.utils import mia_auc  # type: ignore[import-not-found]

    coll = DataCollatorForSupervisedDataset(tok, padding_side="right", index="index")
    left = DataCollatorForSupervisedDataset(tok, padding_side="left", index="index")
    forget, ra = splits["forget10_perturbed"], splits["real_authors_perturbed"]

    def prob(rows: Any, key: str) -> Any:
        return mem.probability._metric_fn(
            model, data=_items(tok, setting, rows, key), collators=coll, batch_size=3
        )

    t: dict[str, Any] = {
        "forget_Q_A_Prob": prob(forget, "answer"),
        "forget_Q_A_PARA_Prob": prob(forget, "paraphrased_answer"),
        "forget_Q_A_PERT_Prob": prob(forget, "perturbed_answer"),
        "ra_Q_A_Prob": prob(ra, "answer"),
        "ra_Q_A_PERT_Prob": prob(ra, "perturbed_answer"),
    }
    pairs = {"correct": t["forget_Q_A_PARA_Prob"], "wrong": t["forget_Q_A_PERT_Prob"]}
    t["forget_truth_ratio"] = mem.truth_ratio._metric_fn(
        model, pre_compute=pairs, aggregator="closer_to_1_better"
    )
    ra_pairs = {"correct": t["ra_Q_A_Prob"], "wrong": t["ra_Q_A_PERT_Prob"]}
    t["ra_Q_A_Prob_normalised"] = mem.probability_w_options._metric_fn(model, pre_compute=ra_pairs)
    t["ra_Truth_Ratio"] = mem.truth_ratio._metric_fn(model, pre_compute=ra_pairs, aggregator="true_better")
    answers = _items(tok, setting, forget, "answer")
    t["extraction_strength"] = mem.extraction_strength._metric_fn(
        model, data=answers, collators=coll, batch_size=3
    )
    t["exact_memorization"] = mem.exact_memorization._metric_fn(
        model, data=answers, collators=coll, batch_size=3
    )
    data = {"forget": answers, "holdout": _items(tok, setting, splits["holdout10"], "answer")}
    kw: dict[str, Any] = {"data": data, "collators": coll, "batch_size": 3}
    t["mia_loss"] = mia.mia_loss._metric_fn(model, **kw)
    t["mia_min_k"] = mia.mia_min_k._metric_fn(model, k=0.4, **kw)
    t["mia_min_k_plus_plus"] = mia.mia_min_k_plus_plus._metric_fn(model, k=0.4, **kw)
    t["mia_zlib"] = mia.mia_zlib._metric_fn(model, tokenizer=tok, **kw)
    t["mia_gradnorm"] = mia.mia_gradnorm._metric_fn(model, data=data, collators=coll, batch_size=1, p=2)
    model.eval()
    model.zero_grad(set_to_none=True)
    t["mia_reference"] = mia_auc(ReferenceAttack, model, data, coll, 3, reference_model=ref)
    t["privleak"] = privacy.privleak._metric_fn(model, pre_compute={"forget": t["mia_min_k"]}, ref_value=0.5)
    gen = DictConfig(do_sample=False, top_p=None, temperature=None, max_new_tokens=12, use_cache=True)
    t["forget_Q_A_ROUGE"] = mem.rouge._metric_fn(
        model,
        tokenizer=tok,
        data=_items(tok, setting, forget, "answer", generate=True),
        collators=left,
        batch_size=3,
        generation_args=gen,
        rouge_type="rougeL_recall",
    )
    return t


def max_diff(a: Any, b: Any, path: str) -> float:
    """Largest |a − b| over matching numbers; strings and structure must be equal (AssertionError naming the
    path where they are not)."""
    if isinstance(a, dict):
        am, bm = {str(k): v for k, v in a.items()}, {str(k): v for k, v in b.items()}
        assert am.keys() == bm.keys(), (path, sorted(am), sorted(bm))
        return max((max_diff(am[k], bm[k], f"{path}.{k}") for k in am), default=0.0)
    if isinstance(a, list | tuple):
        assert len(a) == len(b), path
        return max(
            (max_diff(x, y, f"{path}[{i}]") for i, (x, y) in enumerate(zip(a, b, strict=True))), default=0.0
        )
    if isinstance(a, str) or a is None:
        assert a == b, (path, a, b)
        return 0.0
    return abs(float(a) - float(b))


def main() -> None:
    install_stubs(sys.argv[1])
    import torch

    torch.set_num_threads(1)
    from metrics_data import SPLITS

    from remnant.metrics.encoding import OpenUnlearningPrompt
    from remnant.metrics.evaluate import EvalSettings, evaluate
    from remnant.models.load import load_model

    state, ref = load_model(sys.argv[2]), load_model(sys.argv[3])
    setting = OpenUnlearningPrompt.for_tokenizer(state.tokenizer)
    theirs = _theirs(state.model, ref.model, state.tokenizer, setting, SPLITS)
    ours = evaluate(
        state,
        SPLITS.__getitem__,
        list(theirs),
        prompt=setting,
        settings=EvalSettings(batch_size=4, max_new_tokens=12),
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
