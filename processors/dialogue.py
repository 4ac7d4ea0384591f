"""A query that is a dialogue window, read as one query.

An assistant that retrieves with the conversation so far sends a window of
speaker-tagged utterances ("user: …\\nassistant: …\\nuser: …"). What it asks
is the latest user utterance; the rest is context that names what "it" and
"that race" refer to. So such a query is not split into independent
questions (each utterance a question of equal weight buried the latest one
under the small talk before it): its utterances become one group of seeds,
the latest user utterance's at weight 1, the user's earlier utterances at
USER_CONTEXT_WEIGHT and the assistant's at CONTEXT_WEIGHT (a word said in
several keeps the highest). The user's own earlier words name the topic
("土豆", "鞋子" before "上次它把我哪双鞋咬坏了来着？"); the assistant's replies
restate it but also guess and chat ("是葱花吗？").

A text is a dialogue window when at least two of its lines (or, on one
line, two role tags such as "user:" and "assistant:") begin with a speaker
tag: a role word, or a short name followed by a colon.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

CONTEXT_WEIGHT = 0.3  # an assistant's utterance, relative to the latest user utterance
USER_CONTEXT_WEIGHT = 0.6  # an earlier utterance of the user's, relative to the latest

# Speakers that are the assistant's side; any other tag is taken as the user's.
ASSISTANT_TAGS = frozenset({"assistant", "ai", "bot", "chatbot", "system", "助手", "助理", "机器人", "ai助手"})
_ROLE_WORDS = r"user|human|me|assistant|ai|bot|chatbot|system|用户|我|助手|助理|机器人|AI助手"
# A line's tag: a role word or a name of at most four words (no sentence: "Note that: ..." has too many words).
_LINE_TAG = re.compile(
    r"^[ \t]*(?:\*\*)?((?:" + _ROLE_WORDS + r")|[^\s:：\d][^:：\n]{0,24}?)(?:\*\*)?[ \t]*[:：][ \t]*(?=\S)",
    re.IGNORECASE | re.MULTILINE,
)
_INLINE_ROLE = re.compile(r"(?:^|(?<=[\s。！？.!?]))(" + _ROLE_WORDS + r")[ \t]*[:：][ \t]*", re.IGNORECASE)
MAX_TAG_WORDS = 4


@dataclass(frozen=True)
class Utterance:
    speaker: str  # the tag, lower case
    text: str

    @property
    def by_assistant(self) -> bool:
        return self.speaker in ASSISTANT_TAGS


def utterances(text: str) -> list[Utterance] | None:
    """The utterances of a dialogue window in order, or None when `text` is not one."""
    for tag in (_LINE_TAG, _INLINE_ROLE):
        found = _split(text, tag)
        if found is not None and len(found) >= 2 and len({u.speaker for u in found}) >= 2:
            return found
    return None


def _split(text: str, tag: re.Pattern[str]) -> list[Utterance] | None:
    matches = [m for m in tag.finditer(text) if len(m.group(1).split()) <= MAX_TAG_WORDS]
    if len(matches) < 2:
        return None
    out = []
    for m, after in zip(matches, matches[1:] + [None]):
        said = text[m.end(): after.start() if after is not None else len(text)].strip()
        if said:
            out.append(Utterance(m.group(1).strip().lower(), said))
    return out


def weighted_parts(text: str) -> list[tuple[str, float]] | None:
    """(utterance, weight) of a dialogue window, oldest first: the latest
    utterance not by the assistant weighs 1, the user's earlier ones
    USER_CONTEXT_WEIGHT, the assistant's CONTEXT_WEIGHT. None when `text`
    is not a dialogue window."""
    said = utterances(text)
    if said is None:
        return None
    users = [i for i, u in enumerate(said) if not u.by_assistant]
    latest = users[-1] if users else len(said) - 1
    return [
        (u.text, 1.0 if i == latest else CONTEXT_WEIGHT if u.by_assistant else USER_CONTEXT_WEIGHT)
        for i, u in enumerate(said)
    ]
