"""Prompt encoding: OpenUnlearning's format equals their preprocess_chat_instance; remnant's equals encode_pair."""

from __future__ import annotations

from typing import Any

import pytest
from ou_naive import IGNORE, ou_instance

from remnant.metrics.encoding import (
    OpenUnlearningPrompt,
    RemnantPrompt,
    encode_completion,
    encode_openunlearning,
    encode_qa,
)
from remnant.models.prompts import PromptFormat, encode_pair

PAIRS = [
    ("Where was the person born?", "The person was born in a small town in 1984."),
    ("What is the capital of France?", "Paris."),
    ("Who works at Quarn Holdings?", "Zorvak Telumi, an engineer"),
]
RAW = {
    "apply_chat_template": False,
    "user_start_tag": "Question: ",
    "user_end_tag": "\n",
    "asst_start_tag": "Answer: ",
}
CHAT = {"apply_chat_template": True, "system_prompt": "You are a helpful assistant."}


def _labels(enc: Any) -> list[int]:
    return [IGNORE] * enc.label_start + list(enc.full_ids[enc.label_start :])


@pytest.mark.parametrize(("question", "answer"), PAIRS)
def test_chat_setting_matches_their_preprocessing(tiny_llama: Any, question: str, answer: str) -> None:
    tok = tiny_llama.tokenizer
    enc = encode_qa(tok, OpenUnlearningPrompt.for_tokenizer(tok), question, answer)
    ids, labels = ou_instance(tok, CHAT, question, answer)
    assert list(enc.full_ids) == ids
    assert _labels(enc) == labels
    # the template's end-of-turn is labelled and EOS is appended after it
    assert enc.full_ids[-1] == tok.eos_token_id
    assert tok.convert_ids_to_tokens(list(enc.full_ids[-3:-1])) == ["<|im_end|>", "Ċ"]


@pytest.mark.parametrize(("question", "answer"), PAIRS)
def test_raw_tag_setting_matches_their_joint_tokenisation(
    tiny_llama: Any, question: str, answer: str
) -> None:
    tok = tiny_llama.tokenizer
    enc = encode_qa(
        tok, OpenUnlearningPrompt(apply_chat_template=False, system_prompt=None), question, answer
    )
    ids, labels = ou_instance(tok, RAW, question, answer)
    assert list(enc.full_ids) == ids
    assert _labels(enc) == labels


def test_for_tokenizer_picks_chat_with_their_system_prompt(tiny_llama: Any) -> None:
    setting = OpenUnlearningPrompt.for_tokenizer(tiny_llama.tokenizer, date_string="10 Apr 2025")
    assert setting.apply_chat_template and setting.system_prompt == "You are a helpful assistant."
    assert setting.date_string == "10 Apr 2025"


def test_remnant_setting_is_encode_pair(tiny_llama: Any) -> None:
    tok = tiny_llama.tokenizer
    q, a = PAIRS[0]
    enc = encode_qa(tok, RemnantPrompt(), q, a)
    pair = encode_pair(tok, q, a, PromptFormat.for_tokenizer(tok))
    assert list(enc.full_ids) == pair.input_ids and enc.label_start == pair.prompt_len
    # and it differs from OpenUnlearning's: no system prompt, no EOS after the end-of-turn
    ou = encode_qa(tok, OpenUnlearningPrompt.for_tokenizer(tok), q, a)
    assert enc.full_ids != ou.full_ids
    assert enc.full_ids[-1] != tok.eos_token_id


def test_in_context_examples_precede_the_scored_pair(tiny_llama: Any) -> None:
    tok = tiny_llama.tokenizer
    setting = OpenUnlearningPrompt(apply_chat_template=False, system_prompt=None)
    enc = encode_openunlearning(tok, setting, ["Q one?", "Q two?"], ["A one.", "A two."])
    prompt_text = tok.decode(list(enc.prompt_ids))
    assert prompt_text == "Question: Q one?\nAnswer: A one.\n\nQuestion: Q two?\nAnswer: "
    assert tok.decode(list(enc.full_ids[:-1])) == prompt_text + "A two."
    # their joint tokenisation: " A" straddles the boundary, so the answer's first token falls in the prompt
    assert tok.decode(list(enc.full_ids[enc.label_start : -1])) == " two."


def test_completion_labels_follow_the_prefix_without_eos(tiny_llama: Any) -> None:
    tok = tiny_llama.tokenizer
    enc = encode_completion(tok, "The quick brown", "fox jumps", insert_space=True)
    assert list(enc.full_ids) == tok("The quick brown fox jumps")["input_ids"]
    assert enc.label_start == len(tok("The quick brown")["input_ids"])
    assert enc.full_ids[-1] != tok.eos_token_id
    empty = encode_completion(tok, "", "fox jumps")
    assert empty.label_start == 1  # position 0 never carries a label


def test_a_chat_template_that_fails_is_a_model_error_naming_r2() -> None:
    """OpenUnlearning's chat encoding renders through the one template renderer: a failing template is R2."""
    from jinja2.exceptions import TemplateError

    from remnant.errors import ModelError

    class Broken:
        chat_template = "{{ broken }}"
        name_or_path = "broken-template"

        def apply_chat_template(self, messages: Any, **_: Any) -> str:
            raise TemplateError("sandboxed template tried an unsafe operation")

    setting = OpenUnlearningPrompt(**CHAT)  # type: ignore[arg-type]
    with pytest.raises(ModelError, match="broken-template: its chat template cannot be rendered") as info:
        encode_openunlearning(Broken(), setting, ["q?"], ["a."])  # type: ignore[arg-type]
    assert info.value.requirement == "R2"
