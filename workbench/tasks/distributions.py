"""The input distributions of the correctness rounds (docs/anti-cheating.md, cheat 11: shortcuts that only hold for the
benchmark's inputs), by name.

A round's inputs come from the task's own `get_inputs` with its random draws rerouted (workbench.tasks.reroute), so
what the task builds from them (a triangle, a symmetric product, softmax rows, class indices) is kept and only the
random values change. A distribution says what each floating draw becomes:

* `kind` "own": the draw the task asked for, times `scale` ("default" is the task's code untouched, under the
  round's seed; "large" and "tiny" are the same draws at 1e3 and 1e-3 times the magnitude);
* another kind: the draw's own location and scale around the round's standard draw (`torch.rand(n)` becomes that
  standard draw; `x.uniform_(a, b)` becomes a + (b - a) * draw; `x.normal_(m, s)` becomes m + s * draw).

Integer and discrete draws (randint, randperm, bernoulli, multinomial, random_) are never rerouted: class indices,
masks and permutations keep their range. The names appear in round records and in the UI.
"""

from __future__ import annotations

from dataclasses import dataclass

from workbench.errors import UnknownNameError

#: Standard draws a floating random call can be rerouted to (the "own" kind keeps the task's draw).
KINDS = ("own", "uniform", "normal", "heavy", "negative")


@dataclass(frozen=True)
class Distribution:
    """One named input distribution: what every floating random draw of `get_inputs` becomes (module doc)."""

    name: str
    kind: str
    scale: float = 1.0
    description: str = ""

    @property
    def untouched(self) -> bool:
        """True for the task's own inputs: get_inputs runs without rerouting."""
        return self.kind == "own" and self.scale == 1.0

    def seed(self, seed: int) -> int:
        """The global RNG seed of a draw: the round's seed for the task's own inputs, else one mixed with the
        distribution, so "uniform" inputs of a task that draws with torch.rand differ from its default ones."""
        if self.untouched:
            return seed
        return (seed * 7919 + 104_729 * (DISTRIBUTIONS.index(self.name) + 1)) % (1 << 63)


_ALL = (
    Distribution("default", "own", 1.0, "the task's own get_inputs under the round's seed"),
    Distribution("uniform", "uniform", 1.0, "every floating draw uniform on [0, 1)"),
    Distribution("normal", "normal", 1.0, "every floating draw standard normal (signs, cancellation)"),
    Distribution("heavy", "heavy", 1.0, "Student-t with 3 degrees of freedom, clipped to +-50 so fp16 cannot "
                                        "overflow (outliers)"),
    Distribution("negative", "negative", 1.0, "-4u + 0.5: mostly negative values of varied magnitude"),
    Distribution("large", "own", 1e3, "the task's own draws times 1e3: softmax logits beyond exp's fp32 range (88), "
                                      "squares near fp16's limit"),
    Distribution("tiny", "own", 1e-3, "the task's own draws times 1e-3: values near an epsilon, below fixed "
                                      "thresholds"),
)

#: Name -> Distribution, in round order.
REGISTRY: dict[str, Distribution] = {d.name: d for d in _ALL}

#: Distribution names, in the order the correctness rounds cycle through them.
DISTRIBUTIONS: tuple[str, ...] = tuple(REGISTRY)


def get_distribution(name: str | Distribution) -> Distribution:
    """The Distribution called `name`; an unknown name raises UnknownNameError listing the known ones."""
    if isinstance(name, Distribution):
        return name
    if name not in REGISTRY:
        raise UnknownNameError("distribution", name, list(DISTRIBUTIONS))
    return REGISTRY[name]


def check_names(names: tuple[str, ...] | list[str]) -> None:
    """Raise UnknownNameError for the first name that is not a distribution (a task's `distributions`)."""
    for name in names:
        get_distribution(name)
