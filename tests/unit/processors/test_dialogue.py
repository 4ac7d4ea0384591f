"""A dialogue-window query is read as one: the latest user utterance weighs
most, the user's earlier utterances and the assistant's are context at lower
weights (`processors.dialogue`)."""

import pytest

from emgas.processors.dialogue import CONTEXT_WEIGHT, USER_CONTEXT_WEIGHT, utterances, weighted_parts

C, U = CONTEXT_WEIGHT, USER_CONTEXT_WEIGHT


@pytest.mark.parametrize(
    "text, parts",
    [
        ("user: hi\nassistant: hello Nora\nuser: what did I eat?",
         [("hi", U), ("hello Nora", C), ("what did I eat?", 1.0)]),
        ("用户：今天好累。\n助手：辛苦了。\n用户：猫又闯祸了。",
         [("今天好累。", U), ("辛苦了。", C), ("猫又闯祸了。", 1.0)]),
        # the assistant spoke last: the user's latest utterance is still the question
        ("User: where is my bike?\nAssistant: Did you check the shed?",
         [("where is my bike?", 1.0), ("Did you check the shed?", C)]),
        # tags on one line
        ("user: hi there. assistant: hello. user: where was it?",
         [("hi there.", U), ("hello.", C), ("where was it?", 1.0)]),
        # a person's name as the user's tag
        ("Bart: hey\nAI: hi Bart\nBart: where did I put it?",
         [("hey", U), ("hi Bart", C), ("where did I put it?", 1.0)]),
        ("**user**: one\n**assistant**: two", [("one", 1.0), ("two", C)]),
    ],
)
def test_a_dialogue_window_gives_weighted_utterances(text, parts):
    assert weighted_parts(text) == parts


@pytest.mark.parametrize(
    "text",
    [
        "What did Caroline paint? And when?",
        "我上司叫什么？另外，论坛的地点是什么？",
        "Note: buy milk\nnote: call mum",  # one speaker is no dialogue
        "user: only one utterance",
        "The ratio was 3:2 and then 5:1",
        "",
    ],
)
def test_other_text_is_no_dialogue_window(text):
    assert utterances(text) is None
    assert weighted_parts(text) is None
