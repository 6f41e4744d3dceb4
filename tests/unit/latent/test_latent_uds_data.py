"""The loader for the UDS reference's TOFU entity-span file (``tofu_data/forget10_filtered.json``): records in that
exact format become EntityExamples; malformed ones are refused naming file, record and field (K5, C-H7)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from _uds_reference import build_ctx

from remnant.errors import ConfigError
from remnant.latent.inputs import EntityExample, encode_example
from remnant.latent.uds_data import load_uds_examples, parse_uds_examples

#: Three records as the reference's file holds them (idx 0, 1 and 11 of forget10_filtered.json, verbatim).
REFERENCE_TEXT = """[
  {
    "idx": 0,
    "question": "What is the full name of the author born in Taipei, Taiwan on 05/11/1991 who writes in the genre of leadership?",
    "answer": "The author's full name is Hsiao Yun-Hwa.",
    "prefix": "The author's full name is",
    "entity": "Hsiao Yun-Hwa",
    "full_output": "Hsiao Yun-Hwa.",
    "entity_span": {
      "start": 6,
      "end": 12,
      "tokens": [
        39,
        82,
        23332,
        55092,
        11529,
        10196
      ]
    }
  },
  {
    "idx": 1,
    "question": "What does Hsiao Yun-Hwa identify as in terms of gender?",
    "answer": "Hsiao Yun-Hwa is part of the LGBTQ+ community.",
    "prefix": "Hsiao Yun-Hwa is part of the",
    "entity": "LGBTQ+ community",
    "full_output": "LGBTQ+ community.",
    "entity_span": {
      "start": 10,
      "end": 15,
      "tokens": [
        43,
        21929,
        48,
        10,
        4029
      ]
    }
  },
  {
    "idx": 11,
    "question": "Has Hsiao Yun-Hwa's mother's unemployment played a role in her writings?",
    "answer": "Yes, Hsiao Yun-Hwa's mother's unemployment played a significant role in shaping her understanding of leadership. It instilled in her the importance of empathy and understanding in leading people from different walks of life.",
    "prefix": "",
    "entity": "Yes",
    "full_output": "yes. Hsiao Yun-Hwa often highlights the struggles of women in general and unemployed women specifically in her books, drawing from her mother's experiences.",
    "entity_span": {
      "start": 0,
      "end": 1,
      "tokens": [
        9642
      ]
    }
  }
]
"""


def _records() -> list[dict[str, Any]]:
    data: list[dict[str, Any]] = json.loads(REFERENCE_TEXT)
    return data


def _write(tmp_path: Path, records: Any, name: str = "forget10_filtered.json") -> Path:
    path = tmp_path / name
    path.write_text(records if isinstance(records, str) else json.dumps(records, indent=2), encoding="utf-8")
    return path


def test_reference_file_becomes_entity_examples(tmp_path: Path) -> None:
    got = load_uds_examples(_write(tmp_path, REFERENCE_TEXT))
    assert [e.idx for e in got] == ["0", "1", "11"]
    assert got[0] == EntityExample(
        "0",
        "What is the full name of the author born in Taipei, Taiwan on 05/11/1991 who writes in the genre of "
        "leadership?",
        "The author's full name is Hsiao Yun-Hwa.",
        "The author's full name is",
        "Hsiao Yun-Hwa",
    )
    assert got[2].prefix == "" and got[2].entity == "Yes"


def test_loaded_examples_encode_as_the_reference_does(tmp_path: Path, tiny_llama: Any) -> None:
    tok = tiny_llama.tokenizer
    for ex in load_uds_examples(_write(tmp_path, REFERENCE_TEXT)):
        ref, got = build_ctx(tok, ex), encode_example(tok, ex, "raw")
        assert ref is not None and got is not None
        assert list(got.input_ids) == ref.ids and (got.eval_start, got.eval_end) == (
            ref.eval_start,
            ref.eval_end,
        )
    yes = encode_example(tok, load_uds_examples(_write(tmp_path, REFERENCE_TEXT))[2], "raw")
    assert yes is not None and tok.decode(list(yes.input_ids[: yes.prompt_len])).endswith("Answer: ")


def test_gt_entity_overrides_entity_as_in_the_reference(tmp_path: Path) -> None:
    recs = _records()
    recs[0]["gt_entity"] = "Yun-Hwa"
    recs[1]["full_entity"] = "unused"
    got = load_uds_examples(_write(tmp_path, recs))
    assert got[0].entity == "Yun-Hwa" and got[1].entity == "LGBTQ+ community"


def test_jsonl_holds_the_same_records(tmp_path: Path) -> None:
    lines = "\n".join(json.dumps(r) for r in _records()) + "\n\n"
    path = _write(tmp_path, lines, "spans.jsonl")
    assert load_uds_examples(path) == load_uds_examples(_write(tmp_path, REFERENCE_TEXT))
    bad = [json.dumps(r) for r in _records()]
    bad[1] = bad[1].replace('"question"', '"questoin"')
    with pytest.raises(ConfigError) as err:
        load_uds_examples(_write(tmp_path, "\n".join(bad), "bad.jsonl"))
    assert "bad.jsonl: line 2 (idx 1)" in str(err.value) and "questoin" in str(err.value)


def _mutate(rec: dict[str, Any], case: str) -> None:
    if case == "missing":
        del rec["entity"]
    elif case == "unknown":
        rec["entity_start_char"] = 3
    elif case == "bool_idx":
        rec["idx"] = True
    elif case == "int_question":
        rec["question"] = 7
    elif case == "empty_entity":
        rec["entity"] = ""
    elif case == "span_tokens":
        rec["entity_span"]["tokens"] = [1, 2]
    elif case == "span_order":
        rec["entity_span"]["start"] = 20
    elif case == "float_token":
        rec["entity_span"]["tokens"][0] = 1.5


CASES = {
    "missing": "field 'entity'",
    "unknown": "field 'entity_start_char'",
    "bool_idx": "field 'idx'",
    "int_question": "field 'question'",
    "empty_entity": "field 'entity'",
    "span_tokens": "field 'entity_span'",
    "span_order": "field 'entity_span'",
    "float_token": "field 'entity_span.tokens.0'",
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_malformed_record_names_file_record_and_field(tmp_path: Path, case: str) -> None:
    recs = _records()
    _mutate(recs[1], case)
    path = _write(tmp_path, recs)
    with pytest.raises(ConfigError) as err:
        load_uds_examples(path)
    msg = str(err.value)
    assert msg.startswith(f"{path}: record [1]"), msg
    assert CASES[case] in msg and err.value.requirement == "C-H7"


def test_duplicate_idx_is_refused(tmp_path: Path) -> None:
    recs = _records()
    recs[2]["idx"] = "1"  # the same example id as the integer 1 once read
    with pytest.raises(
        ConfigError,
        match=r"record \[2\] \(idx '1'\): field 'idx': '1' is used again \(first at "
        r"record \[1\]\)",
    ):
        load_uds_examples(_write(tmp_path, recs))


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ('{"idx": 0}', "JSON array of records, not a dict"),
        ("[]", "no records"),
        ("[1]", "record [0]: a record is a JSON object, not a int"),
        ('[{"idx": 0, "idx": 1}]', "duplicate key 'idx'"),
        ('[{"idx": NaN}]', "NaN is not JSON"),
    ],
)
def test_file_level_refusals(tmp_path: Path, text: str, needle: str) -> None:
    path = _write(tmp_path, text)
    with pytest.raises(ConfigError) as err:
        load_uds_examples(path)
    assert str(path) in str(err.value) and needle in str(err.value)


def test_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="nope.json"):
        load_uds_examples(tmp_path / "nope.json")
    assert len(parse_uds_examples(REFERENCE_TEXT, "inline")) == 3
