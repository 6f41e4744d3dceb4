"""One evaluation run: one shared pass, dependencies logged, retain logs, references, clear refusals."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from metrics_data import SPLITS
from scipy.stats import ks_2samp  # type: ignore[import-untyped]

from remnant.errors import ConfigError
from remnant.metrics import forward
from remnant.metrics.encoding import OpenUnlearningPrompt, RemnantPrompt
from remnant.metrics.evaluate import EvalSettings, RetainLog, evaluate, required_splits
from remnant.metrics.rows import QARow

SMALL = EvalSettings(batch_size=3, max_new_tokens=4)


def _run(state: Any, names: list[str], **kw: Any) -> Any:
    settings = kw.pop("settings", SMALL)
    prompt = kw.pop("prompt", OpenUnlearningPrompt.for_tokenizer(state.tokenizer))
    rows = kw.pop("rows", SPLITS)
    return evaluate(state, rows.__getitem__, names, prompt=prompt, settings=settings, **kw)


def test_one_pass_serves_every_log_probability_metric(
    tiny_llama: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[int] = []
    real = forward.teacher_forced_pass

    def spy(model: Any, sequences: Any, **kw: Any) -> Any:
        calls.append(len(sequences))
        return real(model, sequences, **kw)

    monkeypatch.setattr(forward, "teacher_forced_pass", spy)
    names = [
        "forget_Q_A_Prob",
        "extraction_strength",
        "exact_memorization",
        "mia_loss",
        "mia_min_k",
        "mia_zlib",
    ]
    together = _run(tiny_llama, names)
    # one pass, over the 5 forget answers and 5 holdout answers once each (not once per metric)
    assert calls == [10]
    for name in names:
        alone = _run(tiny_llama, [name], settings=dataclasses.replace(SMALL, batch_size=1))
        _close(alone.logs[name].to_json(), together.logs[name].to_json())


def _close(a: Any, b: Any) -> None:
    """Equal structure; floats equal to 1e-5 (batch composition moves the last bits)."""
    if isinstance(a, dict):
        assert a.keys() == b.keys()
        for k in a:
            _close(a[k], b[k])
    elif isinstance(a, float):
        assert a == pytest.approx(b, rel=1e-5, abs=1e-7)
    else:
        assert a == b


def test_dependencies_are_logged_under_their_own_names(tiny_llama: Any) -> None:
    result = _run(tiny_llama, ["forget_Truth_Ratio"])  # their file name is an alias of the log key
    assert set(result.logs) == {"forget_Q_A_PARA_Prob", "forget_Q_A_PERT_Prob", "forget_truth_ratio"}
    assert result.specs["forget_truth_ratio"].to_dict() == {
        "kind": "metric",
        "name": "truth_ratio",
        "version": "1",
        "params": {"aggregator": "closer_to_1_better"},
    }
    assert result.sources["forget_Q_A_PERT_Prob"] == {
        "items": {"split": "forget10_perturbed", "answer_key": "perturbed_answer", "question_key": "question"}
    }


def _retain_log() -> dict[str, Any]:
    """A retain model's log in OpenUnlearning's layout, written by hand."""
    scores = [0.42, 0.9, 1.7, 0.33, 0.61, 0.05]
    return {
        "forget_truth_ratio": {
            "agg_value": 0.5,
            "value_by_index": {str(i): {"score": s} for i, s in enumerate(scores)},
        },
        "mia_min_k": {"agg_value": 0.31, "auc": 0.31, "forget": {}, "holdout": {}},
    }


def test_forget_quality_and_privleak_read_a_retain_log(tiny_llama: Any) -> None:
    log = _retain_log()
    result = _run(
        tiny_llama, ["forget_quality", "privleak"], retain_log=RetainLog(log, "retain/TOFU_EVAL.json")
    )
    ours = [v["score"] for v in (result.logs["forget_truth_ratio"].value_by_index or {}).values()]
    retain = [v["score"] for v in log["forget_truth_ratio"]["value_by_index"].values()]
    assert result.logs["forget_quality"].agg_value == pytest.approx(ks_2samp(ours, retain).pvalue)
    auc = result.logs["mia_min_k"].agg_value
    assert result.logs["privleak"].agg_value == pytest.approx(((1 - auc) - 0.69) / (0.69 + 1e-10) * 100)
    assert result.notes == []


def test_forget_quality_without_retain_log_is_none_with_a_note(tiny_llama: Any) -> None:
    result = _run(tiny_llama, ["forget_quality"])
    assert result.logs["forget_quality"].agg_value is None
    assert result.logs["forget_quality"].to_json() == {"agg_value": None}
    assert any("forget_quality" in n and "--retain-logs" in n for n in result.notes)


def test_retain_log_without_the_truth_ratios_is_refused_before_any_pass(tiny_llama: Any) -> None:
    with pytest.raises(ConfigError, match=r"retain\.json: has no 'forget_truth_ratio'"):
        _run(
            tiny_llama,
            ["forget_quality"],
            retain_log=RetainLog({"mia_min_k": {"agg_value": 0.5}}, "retain.json"),
        )


def test_reference_attack_needs_a_reference_with_the_same_tokenizer(tiny_llama: Any) -> None:
    with pytest.raises(ConfigError, match="--reference"):
        _run(tiny_llama, ["mia_reference"])

    class _Other:
        model = tiny_llama.model

        class tokenizer:  # noqa: N801
            @staticmethod
            def get_vocab() -> dict[str, int]:
                return {"a": 0}

    with pytest.raises(ConfigError, match="tokenizer differs"):
        _run(tiny_llama, ["mia_reference"], reference=_Other())


def test_unknown_metric_and_missing_field_are_clear_errors(tiny_llama: Any) -> None:
    with pytest.raises(ConfigError, match="unknown metric 'forget_prob'.*forget_Q_A_Prob"):
        _run(tiny_llama, ["forget_prob"])
    rows = dict(SPLITS)
    rows["forget10_perturbed"] = [QARow(question="Q?", answer="A.")]
    with pytest.raises(ConfigError, match="split 'forget10_perturbed' row 0: field 'paraphrased_answer'"):
        _run(tiny_llama, ["forget_Q_A_PARA_Prob"], rows=rows)


def test_required_splits_follow_the_settings() -> None:
    s = EvalSettings(forget_split="forget05", holdout_split="holdout05")
    assert required_splits(["mia_min_k"], s) == ["forget05_perturbed", "holdout05"]
    assert required_splits(["model_utility"], s) == [
        "real_authors_perturbed",
        "retain_perturbed",
        "world_facts_perturbed",
    ]


def test_question_key_switches_forget_and_retain_questions_only(tiny_llama: Any) -> None:
    s = dataclasses.replace(SMALL, question_key="paraphrased_question")
    para = _run(tiny_llama, ["forget_Q_A_Prob", "ra_Q_A_Prob"], settings=s)
    plain = _run(tiny_llama, ["forget_Q_A_Prob", "ra_Q_A_Prob"])
    assert para.sources["forget_Q_A_Prob"]["items"]["question_key"] == "paraphrased_question"
    assert para.sources["ra_Q_A_Prob"]["items"]["question_key"] == "question"
    assert para.logs["forget_Q_A_Prob"].agg_value != plain.logs["forget_Q_A_Prob"].agg_value
    assert para.logs["ra_Q_A_Prob"].agg_value == pytest.approx(plain.logs["ra_Q_A_Prob"].agg_value, rel=1e-6)


def test_remnant_prompt_setting_gives_its_own_numbers(tiny_llama: Any) -> None:
    ours = _run(tiny_llama, ["forget_Q_A_Prob"], prompt=RemnantPrompt())
    theirs = _run(tiny_llama, ["forget_Q_A_Prob"])
    assert ours.logs["forget_Q_A_Prob"].agg_value != theirs.logs["forget_Q_A_Prob"].agg_value


def test_only_the_declared_readings_are_computed(tiny_llama: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Routing by declaration: token-score metrics run no generation and no backward pass; a ROUGE metric alone
    runs no teacher-forced pass (its ``Reads.GENERATIONS`` is all it declares)."""
    from remnant.metrics import generation, gradnorm

    def never(*_: Any, **__: Any) -> Any:
        raise AssertionError("a reading no requested metric declared was computed")

    with monkeypatch.context() as mp:
        mp.setattr(generation, "greedy_generations", never)
        mp.setattr(gradnorm, "gradnorm_pass", never)
        assert _run(tiny_llama, ["forget_truth_ratio", "mia_min_k"]).logs["mia_min_k"].agg_value is not None
    calls: list[int] = []
    real = forward.teacher_forced_pass

    def spy(model: Any, sequences: Any, **kw: Any) -> Any:
        calls.append(len(sequences))
        return real(model, sequences, **kw)

    monkeypatch.setattr(forward, "teacher_forced_pass", spy)
    rouge = _run(tiny_llama, ["forget_Q_A_ROUGE"]).logs["forget_Q_A_ROUGE"]
    assert sum(calls) == 0 and len(rouge.value_by_index or {}) == len(SPLITS["forget10_perturbed"])


def test_a_pre_compute_its_metric_does_not_read_is_refused(
    tiny_llama: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from remnant.metrics.catalogue import FORGET, TOFU_METRICS, MetricDef, Source

    deps = (("forget_Q_A_Prob", "forget"),)
    odd = MetricDef("odd_prob", "probability", source=Source(FORGET, "answer"), pre_compute=deps)
    monkeypatch.setitem(TOFU_METRICS, "odd_prob", odd)
    with pytest.raises(ConfigError, match=r"'odd_prob'.*pre_compute is unused.*Reads.DEPENDENCIES") as caught:
        _run(tiny_llama, ["odd_prob"])
    assert caught.value.requirement == "R23"
