"""The metric functions on hand-made numbers: aggregations, AUC with ties, KS, harmonic mean, privleak, ES/EM."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ou_naive import pairwise_auc
from scipy.stats import ks_2samp  # type: ignore[import-untyped]

from remnant.errors import ConfigError
from remnant.metrics import mia
from remnant.metrics.evallog import MetricLog, eval_log_json, per_item_scores, read_eval_log
from remnant.metrics.memorization import exact_memorization, extraction_strength
from remnant.metrics.privacy import forget_quality, privleak, rel_diff
from remnant.metrics.probability import normalised_probability_log, probability_log
from remnant.metrics.scores import TokenScores
from remnant.metrics.truth_ratio import aggregate, ratios, truth_ratio_log
from remnant.metrics.utility import harmonic_mean
from remnant.stats import roc_auc


def _scores(labels: list[int], argmax: list[int], logprobs: list[float] | None = None) -> TokenScores:
    lp = logprobs if logprobs is not None else [-1.0] * len(labels)
    return TokenScores(labels=np.array(labels), logprobs=np.array(lp, dtype=float), argmax=np.array(argmax))


# --- truth ratio -------------------------------------------------------------------------------------------


def test_truth_ratio_aggregations_on_hand_made_ratios() -> None:
    tr = [0.5, 2.0, 1.0, 0.25]
    assert aggregate(tr, "closer_to_1_better") == pytest.approx((0.5 + 0.5 + 1.0 + 0.25) / 4, abs=1e-9)
    assert aggregate(tr, "true_better") == pytest.approx((0.5 + 0 + 0 + 0.75) / 4)
    assert aggregate(tr, "prob_mean") == pytest.approx(3.75 / 4)
    with pytest.raises(ConfigError, match="aggregator"):
        aggregate(tr, "mean")


def test_truth_ratio_forms_from_losses() -> None:
    # p_c = e^-1, p_w = e^-2: TOFU's false/true ratio is e^-1, the prob_mean form p_c/(p_c+p_w)
    assert ratios([1.0], [2.0], "closer_to_1_better")[0] == pytest.approx(math.exp(-1), rel=1e-9)
    assert ratios([1.0], [2.0], "prob_mean")[0] == pytest.approx(1 / (1 + math.exp(-1)), rel=1e-9)


def test_truth_ratio_averages_perturbed_losses_before_exponentiating() -> None:
    correct = MetricLog(0.0, {"0": {"prob": 0.0, "avg_loss": 1.0}})
    wrong = MetricLog(0.0, {"0": {"prob": [0.0, 0.0], "avg_loss": [1.0, 3.0]}})
    log = truth_ratio_log(correct, wrong, "true_better")
    assert log.value_by_index == {"0": {"score": pytest.approx(math.exp(-2) / math.exp(-1))}}


# --- probability ---------------------------------------------------------------------------------------------


def test_probability_is_exp_of_minus_mean_loss_with_eos() -> None:
    s = _scores([5, 6, 0], [5, 6, 0], [-1.0, -2.0, -3.0])
    log = probability_log([[s]], multi=False)
    assert log.value_by_index == {"0": {"prob": pytest.approx(math.exp(-2)), "avg_loss": pytest.approx(2.0)}}


def test_probability_with_nothing_labelled_is_none_and_left_out() -> None:
    empty = _scores([], [])
    log = probability_log([[_scores([1], [1], [-1.0])], [empty]], multi=False)
    assert log.value_by_index is not None and log.value_by_index["1"] == {"prob": None, "avg_loss": None}
    assert log.agg_value == pytest.approx(math.exp(-1))


def test_normalised_probability() -> None:
    correct = MetricLog(0.0, {"0": {"prob": 0.5}, "1": {"prob": 0.1}})
    wrong = MetricLog(0.0, {"0": {"prob": [0.25, 0.25]}, "1": {"prob": [0.3, 0.0]}})
    log = normalised_probability_log(correct, wrong)
    assert log.agg_value == pytest.approx((0.5 / 1.0 + 0.1 / 0.4) / 2, abs=1e-9)


# --- extraction strength / exact memorization -----------------------------------------------------------------


def test_extraction_strength_full_match_is_one() -> None:
    assert extraction_strength(_scores([1, 2, 3, 0], [1, 2, 3, 9])) == 1.0  # the last label is dropped


def test_extraction_strength_no_match_floors_at_one_over_length() -> None:
    assert extraction_strength(_scores([1, 2, 3, 4, 0], [9, 9, 9, 9, 0])) == pytest.approx(1 / 4)
    # only the last token matching scores the same 1/|y| (their loop)
    assert extraction_strength(_scores([1, 2, 3, 4, 0], [9, 9, 9, 4, 0])) == pytest.approx(1 / 4)
    assert extraction_strength(_scores([1, 2, 3, 4, 0], [9, 9, 3, 4, 0])) == pytest.approx(1 - 2 / 4)


def test_extraction_strength_and_em_with_nothing_to_score() -> None:
    only_eos = _scores([0], [0])
    assert extraction_strength(only_eos) == 0.0
    assert exact_memorization(only_eos) is None


def test_exact_memorization_share_of_matches() -> None:
    assert exact_memorization(_scores([1, 2, 3, 4, 0], [1, 9, 3, 9, 7])) == pytest.approx(0.5)


# --- membership attacks ----------------------------------------------------------------------------------------


def test_min_k_takes_floor_of_k_n_lowest_and_drops_the_last_label() -> None:
    s = _scores([1, 2, 3, 4, 5, 6], [0] * 6, [-1.0, -5.0, -2.0, -4.0, -3.0, -100.0])
    assert mia.min_k_score(s, 0.4) == pytest.approx(4.5)  # int(5*0.4) = 2 lowest of the first five: -5, -4
    assert mia.min_k_score(_scores([1, 2], [0, 0], [-7.0, -1.0]), 0.4) == pytest.approx(7.0)  # at least one
    assert mia.min_k_score(_scores([1], [0], [-3.0]), 0.4) == 0.0


def test_min_k_plus_plus_normalises_by_vocab_statistics() -> None:
    s = TokenScores(
        labels=np.array([1, 2, 3]),
        logprobs=np.array([-1.0, -3.0, -9.0]),
        argmax=np.array([0, 0, 0]),
        mu=np.array([-2.0, -2.0, 0.0]),
        var=np.array([4.0, 0.0, 1.0]),
    )
    # z = (-1+2)/2 = 0.5, (-3+2)/sqrt(1e-6) = -1000; k·n = 0.8 → 1 lowest
    assert mia.min_k_plus_plus_score(s, 0.4) == pytest.approx(1000.0)


def test_zlib_divides_by_compressed_bytes() -> None:
    import zlib

    s = _scores([1, 2], [0, 0], [-2.0, -4.0])
    assert mia.zlib_score(s, "abc abc abc") == pytest.approx(3.0 / len(zlib.compress(b"abc abc abc")))


def test_auc_sign_convention_forget_lower_loss_means_one() -> None:
    entry = mia.mia_log([0.1, 0.2, 0.3], [1.0, 2.0]).to_json()
    assert entry["auc"] == entry["agg_value"] == 1.0
    assert entry["forget"]["value_by_index"] == {
        "0": {"score": 0.1},
        "1": {"score": 0.2},
        "2": {"score": 0.3},
    }
    assert entry["holdout"]["agg_value"] == pytest.approx(1.5)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.integers(0, 5).map(float), min_size=1, max_size=12),
    st.lists(st.integers(0, 5).map(float), min_size=1, max_size=12),
)
def test_auc_equals_pairwise_count_with_ties(forget: list[float], holdout: list[float]) -> None:
    assert roc_auc(forget, holdout) == pytest.approx(pairwise_auc(forget, holdout), abs=1e-12)


def test_auc_refuses_one_class() -> None:
    with pytest.raises(ConfigError, match="each class"):
        roc_auc([], [1.0])


# --- forget quality, privleak, model utility --------------------------------------------------------------------


def test_forget_quality_is_scipy_ks_pvalue() -> None:
    model = [0.1, 0.5, 0.9, 1.3, 0.2]
    retain = [0.6, 0.7, 0.8, 1.9, 2.5, 0.65]
    assert forget_quality(model, retain) == ks_2samp(model, retain).pvalue
    # invariant to TR -> 1/TR (legacy TOFU used true/false)
    assert forget_quality([1 / x for x in model], [1 / x for x in retain]) == pytest.approx(
        forget_quality(model, retain)
    )
    assert forget_quality(model, None) is None


def test_privleak_formula_and_fallback() -> None:
    assert privleak(0.9, 0.4) == pytest.approx(((1 - 0.9) - 0.6) / (0.6 + 1e-10) * 100)
    assert privleak(0.9, None) == pytest.approx((0.1 - 0.5) / (0.5 + 1e-10) * 100)  # retain AUC 0.5
    assert privleak(0.5, None) == pytest.approx(0.0)
    assert rel_diff(0.9, None) == pytest.approx((0.9 - 0.5) / (0.5 + 1e-10) * 100)


def test_model_utility_harmonic_mean_and_zero_propagation() -> None:
    assert harmonic_mean({"a": 0.5, "b": 0.25}) == pytest.approx(1 / 3)
    assert harmonic_mean({"a": 0.5, "b": 0.0, "c": 0.9}) == 0.0
    with pytest.raises(ValueError, match="b"):
        harmonic_mean({"a": 0.5, "b": None})


# --- the log layout --------------------------------------------------------------------------------------------


def test_eval_log_is_sorted_and_refuses_non_finite() -> None:
    entries = {"b": MetricLog(1.0).to_json(), "a": MetricLog(None, {"0": {"score": 2.0}}).to_json()}
    text = eval_log_json(entries)
    assert list(json.loads(text)) == ["a", "b"] and text.endswith("}\n")
    assert json.loads(text)["a"] == {"agg_value": None, "value_by_index": {"0": {"score": 2.0}}}
    with pytest.raises(ConfigError, match="non-finite"):
        eval_log_json({"a": MetricLog(float("nan")).to_json()})


def test_read_eval_log_is_strict(tmp_path: Path) -> None:
    bad = tmp_path / "TOFU_EVAL.json"
    bad.write_text('{"forget_truth_ratio": {"agg_value": NaN}}')
    with pytest.raises(ConfigError, match="TOFU_EVAL.json"):
        read_eval_log(bad)
    bad.write_text('{"a": {"agg_value": 1}, "a": {"agg_value": 2}}')
    with pytest.raises(ConfigError, match="duplicate key"):
        read_eval_log(bad)
    bad.write_text('{"forget_truth_ratio": {"value_by_index": {"0": {"prob": 1}}}}')
    with pytest.raises(ConfigError, match="has no 'score'"):
        per_item_scores(read_eval_log(bad), "forget_truth_ratio", source=str(bad))
