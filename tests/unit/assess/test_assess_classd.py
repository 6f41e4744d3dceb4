"""The Class D battery in ``remnant assess`` on the tiny model (D-2 to D-5.3, D4, R3, C-Q4, C-W5).

One assessment with a ``[class_d.battery]`` table is shared by the module. Its statement's ``class_d`` block is
checked against numbers recomputed here from the run's observations alone (each item's hit, target canaries and
control entities apart, the Wilson interval, the net bound and the deciding measurement), so a miscount anywhere
between the battery and the statement fails; recompute and kill-and-resume must reproduce the statement bytes.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from remnant.cli import main
from remnant.config import load_config
from remnant.prereg import freeze, load_prereg
from remnant.records import CellRecord, Observation, RecordStore
from remnant.stats import wilson_interval

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "integration"))
from assess_fixtures import write_config  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

RISKS = ("singling_out", "linkability", "inference")
THRESHOLD = 0.05
BATTERY = """justification = "A test threshold."

[class_d.battery]
attacks = ["prefill", "repeated_sampling"]
relearning_budgets = [4]
max_new_tokens = 8
"""


class Killed(Exception):
    """Raised from the test seam in place of a kill."""


def _pack(directory: Path) -> Path:
    from remnant.packs import ClassDSpec, mint_class_d, write_pack

    write_pack(mint_class_d(ClassDSpec(entities=12, controls=4, seed=3, general=False)), directory)
    return directory


def _leaky_model(tiny_llama: Any, pack_dir: Path, out: Path) -> Path:
    """The tiny model taught the target canaries' staff codes and links (a removal that removed nothing), so the
    battery has recoveries to count; control entities are never taught (D4)."""
    import copy

    import torch

    from remnant.classd import linkability_probes, singling_out_probes
    from remnant.models import save_model
    from remnant.models.prompts import PromptFormat, encode_pair
    from remnant.packs import load_pack

    pack = load_pack(pack_dir)
    tok = tiny_llama.tokenizer
    fmt = PromptFormat.for_tokenizer(tok)
    so, link = singling_out_probes(pack).target, linkability_probes(pack).target
    pairs = [encode_pair(tok, p.question, p.answer, fmt) for p in so]
    pairs += [encode_pair(tok, p.question, p.options[p.answer_index], fmt) for p in link]  # type: ignore[index]
    width = max(len(p.input_ids) for p in pairs)
    ids = torch.tensor([p.input_ids + [0] * (width - len(p.input_ids)) for p in pairs])
    labels = torch.tensor([p.labels + [-100] * (width - len(p.labels)) for p in pairs])
    mask = torch.tensor([[1] * len(p.input_ids) + [0] * (width - len(p.input_ids)) for p in pairs])
    model = copy.deepcopy(tiny_llama.model)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=5e-3)
    for _ in range(40):
        loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    return save_model(model, tok, out)


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory, tiny_llama_dir: Path, tiny_llama: Any) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("assess-classd")
    pack = _pack(root / "pack")
    leaky = _leaky_model(tiny_llama, pack, root / "leaky")
    config = write_config(
        root / "config.toml",
        pack=pack,
        control=tiny_llama_dir,
        post=f'folder = "{leaky}"',
        **{
            'justification = "A test threshold."\n': BATTERY,
            "[models.pre_removal.install]\nmax_epochs = 1\nlr = 1e-3\ntarget_kappa = 0.9\nbatch_size = 16\n": (
                f'[models.pre_removal]\nfolder = "{tiny_llama_dir}"\n'
            ),
            "[target]\n": '[target]\nprovenance = "The test suite taught the leaky model its canaries."\n',
        },
    )
    assert "install]" not in config.read_text()
    return {"root": root, "pack": pack, "config": config}


@pytest.fixture(scope="module")
def run(setup: dict[str, Path]) -> Path:
    out = setup["root"] / "run-a"
    assert main(["preregister", str(setup["config"]), "--out", str(out)]) == 0
    assert main(["assess", str(setup["config"]), "--out", str(out), "--quiet"]) == 0
    return out


def _records(run: Path) -> list[Any]:
    return RecordStore(run / "records.jsonl").read()


def _wilson_net(k: int, n: int, ck: int, cn: int, baseline: float | None) -> tuple[float, float, float]:
    """(net point, net lower, net upper): Wilson on k/n, less baseline and the control-entity point (D4)."""
    b = baseline or 0.0
    control = max(ck / cn - b, 0.0)
    lo, hi = wilson_interval(k, n)
    return tuple(max(max(x - b, 0.0) - control, 0.0) for x in (k / n, lo, hi))  # type: ignore[return-value]


def _expected_from_observations(run: Path) -> dict[str, dict[str, Any]]:
    """Per measurement on the post-removal model, counts rebuilt from item observations (checkpoint by
    checkpoint for relearning), the most adverse checkpoint by net upper bound."""
    from remnant.packs import load_pack

    pack = load_pack(run.parent / "pack")
    roles = {e.id: e.role for e in pack.manifest.entities}
    cells = [r for r in _records(run) if isinstance(r, CellRecord) and r.risk is not None]
    baseline = {c.attack: c.baseline for c in cells}
    risk_of = {c.attack: c.risk for c in cells}
    hits: dict[tuple[str, str], dict[str, list[float]]] = {}
    for o in _records(run):
        if isinstance(o, Observation) and o.model_state == "post_removal" and o.attack in risk_of:
            value = float(o.kappa) if o.kappa is not None else float(o.score or 0.0)
            side = "control" if roles[o.item_id.split(".")[0]] == "control" else "target"
            hits.setdefault((o.attack, o.checkpoint), {"target": [], "control": []})[side].append(value)
    out: dict[str, dict[str, Any]] = {}
    for (name, checkpoint), sides in hits.items():
        k, ck = round(sum(sides["target"])), round(sum(sides["control"]))
        n, cn = len(sides["target"]), len(sides["control"])
        point, lo, hi = _wilson_net(k, n, ck, cn, baseline[name])
        row = {"name": name, "risk": risk_of[name], "k": k, "n": n, "control_k": ck, "control_n": cn}
        row.update(baseline=baseline[name], net=(point, lo, hi), checkpoint=checkpoint)
        if name not in out or hi > out[name]["net"][2]:
            out[name] = row
    return out


def test_statement_carries_the_class_d_block_computed_from_the_records(
    run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    statement = json.loads((run / "statement.json").read_text())
    block = statement["class_d"]
    assert "absent" not in block, block
    assert block["threshold"] == THRESHOLD and block["justification"] == "A test threshold."  # D-5.2
    expected = _expected_from_observations(run)
    names = {row["risk"]: [] for row in expected.values()}
    for row in expected.values():
        names[row["risk"]].append(row["name"])
    assert sorted(names["singling_out"]) == [
        "singling_out",
        "singling_out/prefill",
        "singling_out/relearning",
        "singling_out/repeated_sampling",
    ]
    assert "linkability/likelihood" in names["linkability"]
    assert "linkability/relearning/likelihood" in names["linkability"]
    below_all = []
    for risk in RISKS:
        rows = [expected[n] for n in names[risk]]
        deciding = max(rows, key=lambda r: r["net"][2])
        got = block[risk]
        assert got["measurement"] == deciding["name"]
        assert (got["k"], got["n"]) == (deciding["k"], deciding["n"])
        assert (got["control_k"], got["control_n"]) == (deciding["control_k"], deciding["control_n"])
        assert got["ci95"] == pytest.approx(wilson_interval(deciding["k"], deciding["n"]))
        assert got["net_rate"] == pytest.approx(deciding["net"][0])
        assert got["net_ci95"] == pytest.approx(deciding["net"][1:])
        assert got["upper_bound"] == pytest.approx(deciding["net"][2])
        below = all(r["net"][2] < THRESHOLD for r in rows)
        assert got["below_threshold"] is below
        below_all.append(below)
        if risk == "linkability":
            assert got["baseline"] == pytest.approx(0.25)  # four options: forced-choice chance (D-3)
    assert block["passes"] is all(below_all)
    # n = 3 probe entities per risk: the bound at zero recoveries is far above 0.05, so the bar cannot pass
    assert block["passes"] is False and statement["verdict"] != "removed"
    assert block["canary_design"]["probe_entities"] == 3 and block["canary_design"]["control_entities"] == 4
    capsys.readouterr()
    assert main(["validate", str(run / "statement.json")]) == 0
    assert json.loads(capsys.readouterr().out)["conformant"] is True


def test_battery_facts_are_the_post_removal_counts_net_of_control_entities(run: Path) -> None:
    statement = json.loads((run / "statement.json").read_text())
    expected = _expected_from_observations(run)
    risky = [a for a in statement["facts"]["attacks"] if a.get("risk")]
    assert {a["name"] for a in risky if a["status"] == "run"} == set(expected)
    for a in risky:
        e = expected[a["name"]]
        assert (a["k"], a["n"], a["control_k"], a["control_n"]) == (
            e["k"],
            e["n"],
            e["control_k"],
            e["control_n"],
        )
        assert a["surface"] == ("relearning" if "/relearning" in a["name"] else "inference_time")
    # the facts list the risks in order: singling out, linkability, inference (D-2, D-3, D-4)
    order = [a["risk"] for a in risky]
    assert order == sorted(order, key=RISKS.index)


def test_post_removal_and_control_get_the_identical_battery(run: Path) -> None:
    """R3, C-Q4, C-W5: every battery measurement on both models, same items, seeds and checkpoints."""
    cells = [
        r for r in _records(run) if isinstance(r, CellRecord) and r.risk is not None and r.status == "run"
    ]
    by_state: dict[str, set[tuple[str, str, str, int]]] = {}
    for c in cells:
        by_state.setdefault(c.model_state, set()).add((c.attack, c.metric, c.checkpoint, c.n))
    assert set(by_state) == {"post_removal", "control"}
    assert by_state["post_removal"] == by_state["control"]
    assert {m for _, m, _, _ in by_state["control"]} == {"kappa", "kappa_control_entities"}
    relearned = {cp for a, _, cp, _ in by_state["control"] if "/relearning" in a}
    assert relearned == {"budget=4/step=0", "budget=4/step=1", "budget=4/step=2"}
    # ... and the typed fields the facts read, not the label (C-W3, D-5.3)
    along = [c for c in cells if "/relearning" in c.attack]
    assert {(c.budget, c.step, c.examples) for c in along} == {(4, 0, 0), (4, 1, 2), (4, 2, 4)}
    assert all(c.entities in ("target", "control") and c.method in ("direct", "likelihood") for c in along)
    assert {c.reused_step0 for c in along if c.step == 0} == {True}  # the direct measurement's counts
    assert {c.reused_step0 for c in along if c.step} == {False}
    obs = [r for r in _records(run) if isinstance(r, Observation) and r.attack == "inference/prefill"]
    items = {
        s: sorted((o.item_id, o.seed) for o in obs if o.model_state == s) for s in ("post_removal", "control")
    }
    assert items["post_removal"] == items["control"] and len(items["control"]) == 3 + 4
    # many_shot is not among the battery's attacks: no cell, and the main many_shot cell is untouched
    assert not [c for c in cells if c.attack.endswith("/many_shot")]


def test_recompute_reproduces_the_class_d_statement_without_torch(run: Path) -> None:
    before = (run / "statement.json").read_bytes()
    code = (
        "import sys; from remnant.assess.recompute import recompute; "
        f"o = recompute({str(run)!r}); "
        "assert 'torch' not in sys.modules, 'recompute imported torch'; "
        "print(o.statement.class_d.singling_out.k)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert (run / "statement.json").read_bytes() == before


def test_kill_in_the_battery_and_resume_gives_the_identical_statement(
    run: Path, setup: dict[str, Path]
) -> None:
    from remnant.assess.run import Session, assess

    out = setup["root"] / "run-b"
    cfg = load_config(setup["config"])
    freeze(cfg, out, registered_at=load_prereg(run).registered_at)

    def kill(label: str) -> None:
        if label == "class D relearning b=4 on post_removal":
            raise Killed(label)

    with pytest.raises(Killed):
        assess(cfg, out, session=Session(progress=False, before_cell=kill, log=lambda _: None))
    done = RecordStore(out / "records.jsonl").completed_cells()
    assert not (out / "statement.json").exists()
    outcome = assess(cfg, out, resume=True, session=Session(progress=False, log=lambda _: None))
    assert outcome.statement is not None
    assert RecordStore(out / "records.jsonl").completed_cells() > done
    # Same figures; the pins differ, as the records carry the resume and their timestamps (R23).
    from remnant.assess.finalize import without_pins

    assert without_pins(json.loads((out / "statement.json").read_bytes())) == without_pins(
        json.loads((run / "statement.json").read_bytes())
    )


def test_a_pack_whose_inference_baseline_is_one_is_refused_before_the_battery(
    tmp_path: Path, tiny_llama_dir: Path
) -> None:
    """On 8 entities with 1 control every held-out value equals the population guess: baseline 1, nothing to
    measure above it (D-4.2). Refused when the battery is prepared, naming the pack and the requirement, not as an
    invalid statement after the run."""
    from types import SimpleNamespace

    from remnant.assess.classd import prepare_battery
    from remnant.errors import ConfigError
    from remnant.packs import ClassDSpec, load_pack, mint_class_d, write_pack

    write_pack(mint_class_d(ClassDSpec(entities=8, controls=1, seed=3, general=False)), tmp_path / "pack")
    config = write_config(
        tmp_path / "config.toml",
        pack=tmp_path / "pack",
        control=tiny_llama_dir,
        **{'justification = "A test threshold."\n': BATTERY},
    )
    with pytest.raises(ConfigError, match=r"inference baseline on the target canaries is 1") as info:
        prepare_battery(load_config(config), SimpleNamespace(pack=load_pack(tmp_path / "pack")))
    assert info.value.requirement == "D-4.2" and "classd-s3-n8-c1" in str(info.value)
