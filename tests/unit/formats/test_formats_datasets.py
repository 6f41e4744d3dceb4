"""TOFU folders as ``datasets`` writes and reads them (R2): an export's dataset card makes
``load_dataset(folder, name=SPLIT)`` work as OpenUnlearning loads TOFU, and a ``save_to_disk`` folder reads back
with remnant's reader, row for row: export -> load_dataset -> save_to_disk -> read_tofu."""

from __future__ import annotations

from pathlib import Path

import pytest
from formats_data import tofu_rows, write_tofu

from remnant.errors import ConfigError
from remnant.formats import pack_to_tofu, read_tofu, tofu_to_pack

datasets = pytest.importorskip("datasets")


@pytest.fixture
def exported(tmp_path: Path) -> Path:
    pack = tofu_to_pack(write_tofu(tmp_path / "tofu"), "forget10", "retain90", "holdout10")
    pack_to_tofu(pack, tmp_path / "export", forget="forget10", retain="retain90", holdout="holdout10")
    return tmp_path / "export"


def test_export_round_trips_through_datasets(exported: Path, tmp_path: Path) -> None:
    ours = read_tofu(exported)
    assert set(ours.splits) >= {"forget10", "forget10_perturbed", "retain90", "full", "world_facts_perturbed"}
    saved = tmp_path / "saved"
    for i, name in enumerate(ours.splits):
        loaded = datasets.load_dataset(str(exported), name=name, split="train", cache_dir=str(tmp_path / "c"))
        want = [r.to_json() for r in ours.rows(name)]
        assert [{k: v for k, v in r.items() if v is not None} for r in loaded] == want, name
        if i % 2:  # both ways save_to_disk writes a split: one Dataset, or a DatasetDict of its one split
            datasets.DatasetDict({"train": loaded}).save_to_disk(str(saved / name))
        else:
            loaded.save_to_disk(str(saved / name))
    back = read_tofu(saved)
    assert list(back.splits) == list(ours.splits)
    for name in ours.splits:
        assert back.rows(name) == ours.rows(name), name
        assert back.sources[name].layout == "saved"
        assert all(f.format == "arrow" and f.path.endswith(".arrow") for f in back.sources[name].files)
    # the rows are the source TOFU folder's, through two libraries and back
    assert [r.to_json() for r in back.rows("retain90")] == tofu_rows()["retain90"]


def test_the_card_names_each_file_as_one_config(exported: Path) -> None:
    card = (exported / "README.md").read_text(encoding="utf-8")
    header = card.split("---")[1]
    assert '- config_name: "forget10"' in header and 'path: "forget10.json"' in header
    assert header.count("config_name") == len(list(exported.glob("*.json")))


def test_a_save_to_disk_folder_of_several_splits_is_refused(tmp_path: Path) -> None:
    rows = tofu_rows()["forget10"]
    ds = datasets.Dataset.from_list(rows)
    datasets.DatasetDict({"train": ds, "test": ds}).save_to_disk(str(tmp_path / "tofu" / "forget10"))
    with pytest.raises(
        ConfigError, match=r"dataset_dict\.json: 'splits' must name exactly one split"
    ) as info:
        read_tofu(tmp_path / "tofu", ["forget10"])
    assert info.value.requirement == "R2"


def test_a_dataset_hub_id_reads_from_the_local_hub_cache(
    exported: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``org/name`` naming no path is a dataset repo, read offline from the hub cache's layout (R2)."""
    import hashlib
    import os

    from huggingface_hub import constants

    revision = "89abcdef" * 5
    repo = tmp_path / "hub" / "datasets--tiny-org--tofu"
    snapshot = repo / "snapshots" / revision
    for path in (repo / "blobs", snapshot, repo / "refs"):
        path.mkdir(parents=True)
    (repo / "refs" / "main").write_text(revision)
    for file in sorted(exported.glob("*.json")):
        blob = repo / "blobs" / hashlib.sha256(file.read_bytes()).hexdigest()
        blob.write_bytes(file.read_bytes())
        (snapshot / file.name).symlink_to(os.path.relpath(blob, snapshot))
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.chdir(tmp_path)
    from_hub = read_tofu("tiny-org/tofu")
    assert from_hub.root == snapshot
    local = read_tofu(exported)
    assert from_hub.splits == local.splits and from_hub.provenance() == local.provenance()
    from remnant.cli import main

    assert (
        main(["packs", "import", "--format", "tofu", "tiny-org/tofu", "--out", str(tmp_path / "pack")]) == 0
    )
    assert (
        main(["packs", "import", "--format", "tofu", "tiny-org/missing", "--out", str(tmp_path / "p2")]) == 2
    )
    with pytest.raises(
        ConfigError, match=r"tiny-org/missing: hub dataset not in the local Hugging Face cache"
    ):
        read_tofu("tiny-org/missing")
    (tmp_path / "tiny-org" / "tofu").mkdir(parents=True)
    with pytest.raises(ConfigError, match="holds no TOFU split"):  # an existing path is a path, never the hub
        read_tofu("tiny-org/tofu")
