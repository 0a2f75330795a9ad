"""The %%kwb cell magic: argument errors are one clear line, a cell is evaluated out of process with its own
line numbers, honest and cheating cells get their verdicts (real evaluations on the CPU, tiny sizes)."""

from __future__ import annotations

import sys

import pytest

pytest.importorskip("ipywidgets")
pytest.importorskip("IPython")

from widgets.magic import HEADER, CellVerdict, MagicUsageError, parse_line, parse_size, run_cell  # noqa: E402
from workbench.tasks.task import get_task  # noqa: E402

HONEST = get_task("vector_add").solution_candidate().source
#: A Triton kernel that is defined but never launched; PyTorch does the work (line 14).
TORCH_ONLY = """import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def decoy_kernel(x_ptr):
    pass


class ModelNew(nn.Module):
    def forward(self, a, b):
        return torch.add(a, b)
"""


@pytest.mark.parametrize("line, message", [
    ("", "needs exactly one task name, got no task"),
    ("softmax extra", "got 2 tasks (softmax extra)"),
    ("softmax --bogus 1", "unknown option --bogus; options: --device, --name"),
    ("softmax --precision tf64", "--precision 'tf64': choose one of"),
    ("softmax --policy loose", "--policy 'loose': choose one of strict, partial"),
    ("softmax --device", "--device needs a value"),
    ("softmax --device tpu", "use cpu, cuda or cuda:N"),
    ("softmax --language rust", "choose auto, helion, cute, triton, cuda, torch"),
    ("softmax --size dim", None),  # a bare word is a preset name, checked against the task later
    ("softmax --size dim=", "is not k=v"),
    ("softmax --timeout soon", "give seconds"),
    ("softmax --name 'unclosed", "cannot read the %%kwb line"),
])
def test_bad_lines_say_what_to_write(line, message):
    if message is None:
        assert parse_line(line).size == "dim"
        return
    with pytest.raises(MagicUsageError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_line(line)


def test_precision_and_policy_reach_the_task_of_the_cell_only():
    args = parse_line("softmax --precision tf32 --policy partial")
    assert (args.precision, args.policy) == ("tf32", "partial")


def test_good_line_and_sizes():
    args = parse_line("softmax --device=cpu --name 'my softmax' --size batch_size=4,dim=100,dtype=float16 "
                      "--store r.db --timeout 30")
    assert (args.task, args.device, args.name, args.store, args.timeout) == ("softmax", "cpu", "my softmax", "r.db", 30)
    assert args.size == {"batch_size": 4, "dim": 100, "dtype": "float16"} and parse_size("gpu") == "gpu"


def test_task_size_and_empty_cell_errors_come_before_any_evaluation():
    with pytest.raises(MagicUsageError, match="unknown task 'softmx'.*softmax"):
        run_cell("softmx", HONEST)
    with pytest.raises(MagicUsageError, match="presets cpu, gpu; or give k=v pairs such as --size n=8192"):
        run_cell("vector_add --size tiny", HONEST)
    with pytest.raises(MagicUsageError, match="--size: task 'vector_add' has no size 'rows'; its sizes are n"):
        run_cell("vector_add --size rows=4", HONEST)
    with pytest.raises(MagicUsageError, match="the cell is empty"):
        run_cell("vector_add", "\n  \n")


@pytest.mark.parametrize("size, message", [
    ("dim=abc", "--size dim=abc: dim must be a whole number (the task's default is 8192), e.g. dim=8192"),
    ("batch_size=-4", "--size batch_size=-4: batch_size is a dimension and must be at least 1"),
    ("batch_size=0", "--size batch_size=0: batch_size is a dimension and must be at least 1"),
    ("dim=2.5", "--size dim=2.5: dim must be a whole number"),
    ("dtype=int3", "--size dtype=int3: use one of bfloat16, float16, float32, float64"),
    ("dimm=64", "--size: task 'softmax' has no size 'dimm' (did you mean 'dim'?); its sizes are batch_size, dim"),
])
def test_bad_size_values_are_one_line_usage_errors_before_any_evaluation(size, message):
    """Never a runtime_error blaming the task's get_inputs: the magic refuses the value before a card exists."""
    shown = Shown()
    with pytest.raises(MagicUsageError) as info:
        run_cell(f"softmax --device cpu --size {size}", get_task("softmax").solution_candidate().source, display=shown)
    assert str(info.value) == message or str(info.value).startswith(message), str(info.value)
    assert "\n" not in str(info.value) and not shown.cards


def test_a_partial_size_keeps_the_cpu_preset_for_the_rest_and_the_card_says_so():
    """`--size dim=64` runs batch_size from the CPU preset (64), not the reference file's 8192 rows."""
    shown = Shown()
    result = run_cell("softmax --device cpu --size dim=64", get_task("softmax").solution_candidate().source,
                      display=shown)
    assert result.status == "ok", result.message
    assert result.size == {"batch_size": get_task("softmax").sizes["cpu"]["batch_size"], "dim": 64}
    card = shown.cards[0]
    assert "evaluating softmax (batch_size=64, dim=64, float32) in a judge process" in card._state
    assert "batch_size=64 dim=64 float32" in card._panel.value, card._panel.value
    assert "0.625 FLOP/B: memory-bound on H100 SXM" in card._panel.value  # the projection row of the card


class Shown:
    """Stands in for IPython's display(): keeps what was shown, and the HTML of each later refresh."""

    def __init__(self):
        self.cards: list = []
        self.updates: list[str] = []

    def __call__(self, obj, display_id=None):
        self.cards.append(obj)
        return self  # the display handle

    def update(self, obj):
        self.updates.append(obj.to_html())


def test_cells_are_evaluated_out_of_process_with_cell_line_numbers(tmp_path):
    shown = Shown()
    ns: dict = {}
    before = {m for m in sys.modules if "kwb_candidate" in m}  # other tests import candidates on purpose
    ok = run_cell(f"vector_add --device cpu --name honest --size n=1000 --store {tmp_path / 'r.db'}", HONEST,
                  display=shown, user_ns=ns)
    assert ok.status == "ok" and ok.candidate_name == "honest" and ns["_kwb"] is ok
    assert ok.source == HEADER + HONEST and ok.metadata["origin"] == "%%kwb cell"
    assert {m for m in sys.modules if "kwb_candidate" in m} == before  # never imported in this process
    card = shown.cards[0]
    assert isinstance(card, CellVerdict) and 'data-kwb-status="ok"' in card._panel.value
    assert 'data-kwb-status="ok"' in shown.updates[-1]  # the saved output (HTML fallback) has the verdict too
    # While it ran, the card said which stage the evaluation was in (refreshed once per stage).
    running = [u for u in shown.updates[:-1] if 'data-kwb-status="running"' in u]
    assert any("in a judge process: check" in u for u in running), running
    shown.updates.clear()
    cheat = run_cell("vector_add --device cpu --size n=1000", TORCH_ONLY, display=shown, user_ns=ns)
    assert cheat.status == "rejected" and "torch-compute-in-forward" in cheat.flags
    html = shown.cards[1]._panel.value
    # `return torch.add(a, b)` is line 14 of TORCH_ONLY, so line 15 of the cell (line 1 is %%kwb): the card says 15.
    assert 'data-kwb-line="15"' in html and "<b>cell line 15</b>: <code>return torch.add(a, b)</code>" in html
    assert 'data-kwb-status="rejected"' in shown.updates[-1]
    from workbench.store import Store

    assert len(Store(tmp_path / "r.db").frame()) == 1  # only the run that named --store


def test_extension_registers_the_magic_and_usage_errors_have_no_traceback():
    from IPython.core.error import UsageError
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "widgets")
    assert "kwb" in shell.magics_manager.magics["cell"]
    with pytest.raises(UsageError, match="unknown option --nope"):
        shell.run_cell_magic("kwb", "vector_add --nope", HONEST)


PLAIN_TORCH_SOFTMAX = """import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=-1)
"""


def test_a_plain_torch_cell_is_judged_by_the_kernel_policy_unless_declared_a_baseline():
    """`%%kwb softmax` on plain PyTorch is no kernel (rejected); `--language torch` declares a baseline, and the
    card says the kernel policy was not applied."""
    shown = Shown()
    rejected = run_cell("softmax --device cpu", PLAIN_TORCH_SOFTMAX, display=shown)
    assert rejected.status == "rejected" and "no-custom-kernel" in rejected.flags, rejected.message
    assert 'data-kwb-status="rejected"' in shown.cards[0]._panel.value
    baseline = run_cell("softmax --device cpu --language torch", PLAIN_TORCH_SOFTMAX, display=shown)
    assert baseline.status == "ok" and baseline.kernel_policy == "baseline", baseline.message
    assert "PyTorch baseline: kernel policy not applied" in shown.cards[1]._panel.value


def test_a_wrong_cell_shows_its_heatmap_in_a_display_of_its_own_after_the_card():
    """The live heatmap is displayed once, below the card (never inside a card the page redraws at every stage); the
    card's saved HTML holds the static heatmap."""
    from widgets.magic import CellFigure

    shown = Shown()
    wrong = PLAIN_TORCH_SOFTMAX.replace("return torch.softmax(x, dim=-1)", "return torch.softmax(x, dim=-1) * 1.01")
    res = run_cell("softmax --device cpu --language torch --size batch_size=8,dim=200", wrong, display=shown)
    assert res.status == "incorrect", res.message
    card, figure = shown.cards
    assert isinstance(card, CellVerdict) and isinstance(figure, CellFigure)
    assert figure.fig.data[0].type == "heatmap" and "plotly-graph-div" in shown.updates[-1]
    assert figure.to_html() == '<div class="kwb-static"></div>'  # the card's fallback already has the map
