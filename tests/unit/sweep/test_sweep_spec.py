"""Pool specs: what validates, and every hostile spec refused in one line naming the file, field and rule."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest
from sweep_fixtures import tiny_spec

from remnant.errors import ConfigError
from remnant.sweep.checks import method_points
from remnant.sweep.spec import GeneratedSpec, MethodGrid, parse_spec

HERE = Path(__file__).resolve()
EXAMPLES = HERE.parents[3] / "examples"


def raw(**changes: Any) -> dict[str, Any]:
    data = tomllib.loads(tiny_spec(Path("/models/tiny"), Path("/tmp/store")))
    for dotted, value in changes.items():
        node = data
        *parents, last = dotted.split("__")
        for part in parents:
            node = node.setdefault(part, {})
        if value is _DELETE:
            node.pop(last)
        else:
            node[last] = value
    return data


_DELETE = object()


def refused(data: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as info:
        parse_spec(data, source="pool.toml")
    text = str(info.value)
    assert text.startswith("pool.toml: ")
    return text


def test_the_tiny_spec_and_the_example_specs_validate() -> None:
    from remnant.sweep.spec import RelearnPerturbation, load_spec

    spec = parse_spec(raw(), source="pool.toml")
    assert isinstance(spec, GeneratedSpec)
    paper = RelearnPerturbation()  # the UDS paper's relearning: lr 2e-5, effective batch 32, one epoch
    assert (paper.lr, paper.batch_size * paper.grad_accum, paper.epochs, paper.enabled) == (2e-5, 32, 1, True)
    for name in ("sweep-cpu.toml", "sweep-gpu.toml", "sweep-existing.toml"):
        assert load_spec(EXAMPLES / name).resources.gpus_per_task == 1.0  # GPU resources declared either way


@pytest.mark.parametrize(
    ("changes", "field", "rule"),
    [
        ({"surprise": 1}, "surprise", "R14"),
        ({"kind": "borrowed"}, "kind", "R14"),
        ({"install__lr": float("nan")}, "install.lr", "R14"),
        ({"install__lr": 2.0}, "install.lr", "R14"),
        ({"install__max_epochs": "8"}, "install.max_epochs", "R14"),
        ({"install__target": 0.0}, "install.target", "R14"),
        ({"base": {}}, "base", "R14"),
        ({"base": {"model": "m", "hub": "org/name"}}, "base", "R14"),
        ({"base": {"model": "m", "revision": "main"}}, "base", "R14"),
        ({"base": {"hub": "../up"}}, "base.hub", "R2"),
        ({"pack__path": "p"}, "pack", "R14"),
        ({"pack__mint__towns": 3}, "pack.mint.towns", "R2"),
        ({"target__strengths": [{"label": "a"}, {"label": "a"}]}, "target.strengths", "R14"),
        ({"target__strengths": [{"label": "Bad Label"}]}, "target.strengths[0].label", "R14"),
        ({"removal__parent": "nowhere"}, "removal.parent", "R14"),
        ({"removal__seeds": [-1]}, "removal.seeds[0]", "R14"),
        ({"perturbations__relearn__lr": float("inf")}, "perturbations.relearn.lr", "R14"),
        ({"suite__metrics": ["forget_quality", "no_such_metric"]}, "suite.metrics[1]", "R23"),
        ({"suite__audits": ["j_access"]}, "suite.audits[0]", "C-H7"),
        ({"suite__audit_params": {"uds": {"tau": 0.1, "bogus": 1}}}, "suite.audit_params.uds", "R23"),
        ({"suite__attack_params": {"prefill": {}}}, "suite.attack_params.prefill", "R14"),
        ({"suite__utility": "happiness"}, "suite.utility", "R10"),
        ({"resources__retries": 1000}, "resources.retries", "R14"),
    ],
)
def test_a_spec_that_no_run_can_honour_is_refused_naming_field_and_rule(
    changes: dict[str, Any], field: str, rule: str
) -> None:
    text = refused(raw(**changes))
    assert f"field '{field}'" in text, text
    assert f"({rule})" in text, text


@pytest.mark.parametrize(
    ("audit", "text"),
    [
        (
            "direction_survival",
            "compares with the reference states ['control'], which the pool does not provide",
        ),
        ("j_access", "'j_access' is a jaccess audit; a sweep builds the inputs of the ['uds'] family only"),
    ],
)
def test_a_sweep_runs_an_audit_by_its_declared_references_and_family(audit: str, text: str) -> None:
    """No name list: every registered UDS-family audit runs, one whose class declares what a pool cannot give is
    refused naming the field (C-H7)."""
    err = refused(raw(suite__audits=[audit]))
    assert "field 'suite.audits[0]'" in err and text in err and "(C-H7)" in err, err
    for name in ("uds", "uds_no_retain", "logit_lens_uds"):
        parse_spec(raw(suite__audits=[name]), source="pool.toml")


def test_methods_are_registered_names_with_parameters_that_bind() -> None:
    methods = [{"name": "forget_everything", "grid": {"lr": [1e-4]}}]
    assert "removal.methods[0]" in refused(raw(removal__methods=methods))
    methods = [{"name": "npo", "params": {"betta": 0.1}}]
    text = refused(raw(removal__methods=methods))
    assert "removal.methods[0]" in text and "betta" in text and "(R23)" in text
    methods = [{"name": "npo", "grid": {"lr": [1e-4, 3.0]}}]
    assert "removal.methods[0].grid.lr" in refused(raw(removal__methods=methods))
    methods = [{"name": "npo", "grid": {"lr": [1e-4]}, "points": [{"lr": 1e-4}]}]
    assert "grid or points" in refused(raw(removal__methods=methods))
    methods = [{"name": "npo", "grid": {"lr": []}}]
    assert "grid.lr must list" in refused(raw(removal__methods=methods))
    twice = [{"name": "npo"}, {"name": "npo"}]
    assert "repeats the label 'npo'" in refused(raw(removal__methods=twice))


def test_method_points_are_the_grid_product_or_the_points() -> None:
    grid = MethodGrid(name="npo", grid={"lr": [1e-4, 2e-4], "epochs": [1, 2]})
    assert method_points(grid) == [
        {"epochs": 1, "lr": 1e-4},
        {"epochs": 1, "lr": 2e-4},
        {"epochs": 2, "lr": 1e-4},
        {"epochs": 2, "lr": 2e-4},
    ]
    assert method_points(MethodGrid(name="npo", points=[{"lr": 1e-4}])) == [{"lr": 1e-4}]
    assert method_points(MethodGrid(name="npo")) == [{}]


def test_an_existing_pool_needs_a_path_or_a_glob_and_references_that_name_its_models(tmp_path: Path) -> None:
    base = raw()
    existing = {
        "kind": "existing",
        "name": "elsewhere",
        "pack": base["pack"],
        "suite": {"metrics": ["forget_Q_A_Prob"]},
        "models": [{"pool": "unlearned"}],
    }
    assert "path, glob and hub" in refused(existing)
    existing["models"] = [{"path": "a", "glob": "b*", "pool": "unlearned"}]
    assert "path, glob and hub" in refused(existing)
    existing["models"] = [{"path": "a", "hub": "org/name", "pool": "unlearned"}]
    assert "path, glob and hub" in refused(existing)
    existing["models"] = [{"path": "a", "revision": "main", "pool": "unlearned"}]
    assert "revision only applies with hub" in refused(existing)
    existing["models"] = [{"path": "a", "pool": "retrained"}]
    assert "models[0].pool" in refused(existing)


def test_a_spec_file_with_a_duplicate_key_or_bad_toml_is_refused_naming_the_file(tmp_path: Path) -> None:
    from remnant.sweep.spec import load_spec

    path = tmp_path / "dup.toml"
    path.write_text('kind = "generated"\nkind = "existing"\n')
    with pytest.raises(ConfigError, match=r"dup\.toml: not valid TOML"):
        load_spec(path)
