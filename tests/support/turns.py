"""A stream of the demo turns over several graphs, for crash and fault tests."""

from emgas.processors.events import Turn
from emgas.tools.harness import demo_turns

GRAPHS = 6
ROUNDS = 10  # 34 demo turns x 10 rounds = 340 turns over 6 graphs


def stream_of_turns() -> list[Turn]:
    turns = []
    for r in range(ROUNDS):
        for i, t in enumerate(demo_turns()):
            turns.append(t.model_copy(update={"graph_id": f"crash-{(i + r) % GRAPHS}", "turn_id": f"{t.turn_id}-r{r}"}))
    return turns
