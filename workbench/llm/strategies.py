"""Search strategies: functions of the Loop that ask for rounds until the loop stops them.

Each strategy decides its next round from the nodes recorded so far, never from local counters, so the
same function continues a resumed run where it stopped: best-of-n asks only the samples not yet recorded,
evolutionary fills an unfinished generation before starting the next, refine goes on from the focus node.

* single-shot: one draw.
* best-of-n: n independent draws of one prompt (n defaults to the turn budget), `concurrency` in flight.
* refine: `samples_per_round` drafts per round, the first from the task, each later round from the focus
  (the best correct node, else the latest attempt, to fix its error).
* evolutionary: a population drawn at once, then generations of mutations of tournament-selected correct
  parents (or repairs of the latest failures while nothing is correct), each generation one round.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from workbench.llm.loop import Ask, Loop
from workbench.llm.prompts import MUTATIONS

Strategy = Callable[[Loop], None]
_STRATEGIES: dict[str, Strategy] = {}


def register_strategy(name: str, strategy: Strategy) -> None:
    """A strategy is a function of the Loop that calls `loop.round` (or `loop.step`) until the loop stops it."""
    _STRATEGIES[name] = strategy


def strategies() -> list[str]:
    return sorted(_STRATEGIES)


def get_strategy(name: str) -> Strategy:
    from workbench.errors import UnknownNameError

    if name not in _STRATEGIES:
        raise UnknownNameError("strategy name", name, list(_STRATEGIES))
    return _STRATEGIES[name]


def _single_shot(loop: Loop) -> None:
    if not loop.nodes:
        prompt, parent, role = loop.first_prompt()
        loop.round([Ask(prompt, parent, role)])


def _best_of_n(loop: Loop) -> None:
    # Independent draws of one prompt: the sample index keeps them apart in caches, transcripts and seeds.
    prompt, parent, role = loop.first_prompt()
    n = loop.settings.n or loop.settings.max_turns
    recorded = {node.sample for node in loop.nodes}
    samples = [loop.sample_for(i) for i in range(n)]
    loop.round([Ask(prompt, parent, role, sample=s) for s in samples if s not in recorded])


def _refine(loop: Loop) -> None:
    width = loop.settings.samples_per_round
    while True:
        parent = loop.focus()
        generation = loop.generation() + 1
        if parent is None:
            prompt, parent, role = loop.first_prompt()
            loop.round([Ask(prompt, parent, role, generation) for _ in range(width)])
        else:
            prompt = loop.refine_prompt(parent)
            loop.round([Ask(prompt, parent, "refine", generation) for _ in range(width)])


def _evolutionary(loop: Loop) -> None:
    """Selection is by fitness (speedup, or 1/time under the interpreter) among correct nodes only; until
    something is correct, children repair the latest failure instead. Each generation draws its choices from
    its own seeded generator, so a resumed run chooses as the uninterrupted one would have."""
    size = max(loop.settings.population, 1)
    while True:
        generation = loop.generation()
        have = sum(n.generation == generation for n in loop.nodes) if generation >= 0 else 0
        if generation < 0 or (generation == 0 and have < size):
            prompt, parent, role = loop.first_prompt()
            loop.round([Ask(prompt, parent, role, 0) for _ in range(size - have)])
            continue
        if have >= size:
            generation, have = generation + 1, 0
        loop.round(_children(loop, generation, size - have))


def _children(loop: Loop, generation: int, count: int) -> list[Ask]:
    rng = random.Random(f"{loop.settings.seed}:{generation}")
    earlier = [n for n in loop.nodes if n.generation < generation]
    pool = sorted((n for n in earlier if n.ok), key=lambda n: n.fitness, reverse=True)[:loop.settings.population]
    if loop.seed_node is not None and loop.seed_node.ok and not pool:
        pool = [loop.seed_node]
    asks = []
    for _ in range(count):
        if pool:
            a, b = rng.choice(pool), rng.choice(pool)
            parent = a if (a.fitness or 0) >= (b.fitness or 0) else b
            mutation = rng.choice(MUTATIONS)
            asks.append(Ask(loop.mutation_prompt(parent, mutation), parent, "mutate", generation))
        else:
            parent = loop.latest
            if parent is None:
                prompt, parent, role = loop.first_prompt()
                asks.append(Ask(prompt, parent, role, generation))
            else:
                asks.append(Ask(loop.refine_prompt(parent), parent, "repair", generation))
    return asks


register_strategy("single-shot", _single_shot)
register_strategy("best-of-n", _best_of_n)
register_strategy("refine", _refine)
register_strategy("evolutionary", _evolutionary)
