"""The judge keeps a task's timing pool from one candidate to the next (`judge/timing/inputs.py`). The earlier runner
could write into that memory, so a pool kept this way must reach the next runner blank: else one candidate leaves
the next a message (reference outputs of the deterministic correctness inputs, say) through memory the judge lends
them both. Candidate A marks every kept buffer it can reach in its runner in every call; candidate B, in the same
judge right after, looks for the mark in the kept buffers its runner maps and answers wrongly if it finds one, or if
it finds no kept buffer at all (then this test would show nothing); found, the answer is wrong or flagged, never ok. The object-graph walk is hidden from the
static scan, as an attacker would hide it."""

from __future__ import annotations

import workbench as wb
from redteam.attacks import kernel, softmax_task

FIND_KEPT = '''
import importlib

_objects = getattr(importlib.import_module("".join(["g", "c"])), "_".join(["get", "objects"]))


def _kept_buffers():
    """The raw bytes of the judge's kept pool buffers, as this runner maps them."""
    for obj in _objects():
        raw = getattr(obj, "_raw", None)
        if type(obj).__name__ == "Mapping" and isinstance(raw, dict):
            return [t for bid, t in raw.items() if bid >= (1 << 24)]
    return []


MARK = torch.tensor(list(b"kwb-pool-message"), dtype=torch.uint8)
'''

WRITE = '''
for raw in _kept_buffers():
    raw[-16:] = MARK.to(raw.device)
'''

READ = '''
kept = _kept_buffers()
seen = any(raw[-16:].tolist() == MARK.tolist() for raw in kept)
if seen or not kept:
    y = y * 0
'''


def test_a_kept_pool_carries_no_message_from_one_candidate_to_the_next(one_judge):
    task = softmax_task()
    writer = kernel(at_import=FIND_KEPT, in_forward=WRITE)
    reader = kernel(at_import=FIND_KEPT, in_forward=READ)
    first = wb.evaluate(task, writer, device="cpu")
    second = wb.evaluate(task, reader, device="cpu")
    assert first.status == "ok", first.message
    assert second.protocol.get("timing_pool") == "kept"
    assert second.status == "ok", second.message  # it saw the kept pool, and nothing A wrote in it
