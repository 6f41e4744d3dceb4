"""`[audits.*]`: white-box audit tables (C-H6, C-H7). Each runs one registered audit of its family, its parameters
are checked where they sit, the states it asks for must be buildable from the config, and none of it is frozen by
pre-registration (a latent figure carries no verdict or tier weight, so a change must not become a deviation)."""

from __future__ import annotations

import copy
import tomllib
from pathlib import Path
from typing import Any

import pytest

from remnant.config import AUDIT_TABLES, audit_name, config_digest, parse_config, preregistered
from remnant.errors import ConfigError

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
BASE_D = tomllib.loads((EXAMPLES / "classd-smollm2-npo.toml").read_text(encoding="utf-8"))
BASE_C = tomllib.loads((EXAMPLES / "classc-claimant.toml").read_text(encoding="utf-8"))


def with_audits(audits: dict[str, Any], base: dict[str, Any] = BASE_D) -> dict[str, Any]:
    data = copy.deepcopy(base)
    data["audits"] = audits
    return data


def refused(data: dict[str, Any]) -> ConfigError:
    with pytest.raises(ConfigError) as err:
        parse_config(data, source="c.toml")
    return err.value


def test_tables_default_to_their_family_audit_and_are_not_preregistered() -> None:
    plain = parse_config(copy.deepcopy(BASE_D))
    assert plain.audits.tables() == {}
    cfg = parse_config(with_audits({table: {} for table in AUDIT_TABLES}))
    assert [audit_name(t, s) for t, s in cfg.audits.tables().items()] == [
        "uds",
        "j_access",
        "logit_lens_access",
        "direction_survival",
    ]
    spec = cfg.audits.tables()["jaccess"]
    assert (spec.reference, spec.controls, spec.probes, spec.lens_prompts, spec.max_items) == (
        "control",
        False,
        "identity",
        6,
        None,
    )
    # C-H6: no audit setting is frozen, so none can become a deviation that caps the tier
    assert "audits" not in preregistered(cfg) and config_digest(cfg) == config_digest(plain)
    assert cfg.model_dump(mode="json")["audits"]["uds"]["reference"] == "control"  # the manifest keeps them


def test_disabled_tables_do_not_run() -> None:
    cfg = parse_config(with_audits({"uds": {"enabled": False}, "direction": {}}))
    assert list(cfg.audits.enabled()) == ["direction"] and list(cfg.audits.tables()) == ["uds", "direction"]


@pytest.mark.parametrize(
    ("audits", "field", "rule", "text"),
    [
        ({"uds": {"params": {"k": 0}}}, "audits.uds.params.k", "R23", "top-k"),
        ({"jaccess": {"params": {"alpha": 1.5}}}, "audits.jaccess.params.alpha", "R23", "family-wise"),
        (
            {"jaccess": {"params": {"max_new_tokens": 0}}},
            "audits.jaccess.params.max_new_tokens",
            "R23",
            "generation",
        ),
        ({"direction": {"params": {"margin": 0.0}}}, "audits.direction.params.margin", "R23", "(0, 10]"),
        (
            {"jaccess": {"lens_prompts": 13}},
            "audits.jaccess.lens_prompts",
            "C-H7",
            "less than or equal to 12",
        ),
        ({"uds": {"max_items": 0}}, "audits.uds.max_items", "C-H7", "greater than or equal to 1"),
        ({"uds": {"reference": "never"}}, "audits.uds.reference", "C-H7", "control"),
        ({"tuned_lens": {}}, "audits.tuned_lens", "C-H6", "not a known field"),
        ({"uds": {"layer": [3]}}, "audits.uds.layer", "C-H7", "not a known field"),
    ],
)
def test_bad_tables_are_refused_naming_the_field(
    audits: dict[str, Any], field: str, rule: str, text: str
) -> None:
    err = refused(with_audits(audits))
    assert f"'{field}'" in str(err) and text in str(err) and err.requirement == rule, str(err)


@pytest.mark.parametrize(
    ("audits", "field", "text"),
    [
        (
            {"uds": {"implementation": "j_access"}},
            "audits.uds.implementation",
            "a jaccess audit; this table runs uds",
        ),
        (
            {"logit_lens": {"implementation": "direction_survival"}},
            "audits.logit_lens.implementation",
            "a direction audit; this table runs jaccess or uds",
        ),
        (
            {"jaccess": {"implementation": "oracle"}},
            "audits.jaccess.implementation",
            "unknown audit 'oracle'",
        ),
        ({"uds": {"probes": "answer"}}, "audits.uds.probes", "J-Access audits"),
        ({"direction": {"reference": "retain_only"}}, "audits.direction.reference", "no retain model"),
        (
            {"uds": {"implementation": "uds_no_retain", "reference": "retain_only"}},
            "audits.uds.reference",
            "no retain",
        ),
    ],
)
def test_the_audit_class_declarations_decide_what_a_table_runs(
    audits: dict[str, Any], field: str, text: str
) -> None:
    """Family and references are read from the registered class (Audit.family, Audit.references) when the run
    creates the audit, before anything trains (preregister and assess): bad input naming the field (C-H7)."""
    from remnant.assess.audits import check_audits

    cfg = parse_config(with_audits(audits))
    with pytest.raises(ConfigError) as err:
        check_audits(cfg)
    assert f"'{field}'" in str(err.value) and text in str(err.value), str(err.value)
    assert err.value.requirement == "C-H7"


def test_a_table_runs_any_audit_of_a_family_it_admits() -> None:
    """No name list: the logit-lens table runs the UDS paper's logit-lens baseline (family uds) and J = I."""
    from remnant.assess.audits import check_audits, create_audit

    for name in ("logit_lens_uds", "logit_lens_access"):
        cfg = parse_config(with_audits({"logit_lens": {"implementation": name}}))
        check_audits(cfg)
        audit = create_audit("logit_lens", cfg.audits.enabled()["logit_lens"])
        assert audit.spec.name == name


def test_states_an_audit_asks_for_must_be_buildable() -> None:
    """A claimant's folders carry no install recipe or removal method: no retain-only model, no control states."""
    ok = parse_config(with_audits({"uds": {"reference": "retain_only", "controls": True}}))
    assert ok.audits.enabled()["uds"].controls
    err = refused(with_audits({"uds": {"reference": "retain_only"}}, BASE_C))
    assert "'audits.uds.reference'" in str(err) and "models.pre_removal.install" in str(err)
    assert err.requirement == "C-H7"
    err = refused(with_audits({"jaccess": {"controls": True}}, BASE_C))
    assert "'audits.jaccess.controls'" in str(err) and "controls = false" in str(err)
    # controls = false is the way through: the statement then says the controls were not run (C-H7c)
    assert parse_config(with_audits({"jaccess": {}}, BASE_C)).audits.enabled()["jaccess"].controls is False


def test_lens_corpus_size_is_the_bound() -> None:
    from remnant.config.audits import MAX_LENS_PROMPTS
    from remnant.latent.lens_text import LENS_TEXT

    assert len(LENS_TEXT) == MAX_LENS_PROMPTS
