"""roofline.specs and roofline.ceilings: datasheet table, device-name detection, measured CPU ceilings and their
on-disk cache, and the `kwb ceilings` command."""

from __future__ import annotations

import argparse
import json
import os

import pytest

import workbench as wb
from roofline import ceilings as C
from roofline.cli import add_ceilings_commands, add_cli, ceilings_table
from roofline.specs import (
    DeviceSpec,
    detect,
    dtype_key,
    from_ceilings,
    get_spec,
    match_device_name,
    register_spec,
    specs,
)

TABLE = ("H100 SXM", "H100 PCIe", "H200", "A100 SXM 80GB", "L4", "L40S", "RTX 4090", "B200", "MI300X")


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    """One private ceilings cache for the module: the CPU is measured once here, never read from $HOME."""
    path = tmp_path_factory.mktemp("kwb_cache")
    old = os.environ.get("KWB_CACHE_DIR")
    os.environ["KWB_CACHE_DIR"] = str(path)
    yield path
    if old is None:
        os.environ.pop("KWB_CACHE_DIR", None)
    else:
        os.environ["KWB_CACHE_DIR"] = old


@pytest.mark.parametrize("torch_name, entry", [
    ("NVIDIA H100 80GB HBM3", "H100 SXM"),
    ("NVIDIA H100 PCIe", "H100 PCIe"),
    ("NVIDIA H200", "H200"),
    ("NVIDIA A100-SXM4-80GB", "A100 SXM 80GB"),
    ("NVIDIA L4", "L4"),
    ("NVIDIA L40S", "L40S"),
    ("NVIDIA GeForce RTX 4090", "RTX 4090"),
    ("NVIDIA B200", "B200"),
    ("AMD Instinct MI300X", "MI300X"),
    # Variants with other clocks or bandwidth must not borrow a neighbour's datasheet.
    ("NVIDIA H100 NVL", None),
    ("NVIDIA A100-SXM4-40GB", None),
    ("NVIDIA A100 80GB PCIe", None),
    ("NVIDIA L40", None),
    ("NVIDIA GB200", None),
    ("NVIDIA GeForce RTX 4090 D", None),
    ("Some Future GPU", None),
])
def test_torch_device_names_map_to_the_right_entry(torch_name, entry):
    spec = match_device_name(torch_name)
    assert (spec.name if spec else None) == entry


def test_table_holds_dense_datasheet_numbers():
    assert set(TABLE) <= set(specs())
    for name in TABLE:
        s = get_spec(name)
        assert s.source.startswith("https://") and s.sm_count > 0 and s.l2_bytes > 0
        assert s.memory_bandwidth > 1e11
        # Tensor-core 16-bit rates are above the vector fp32 rate on every device in the table.
        assert s.peak("float16") > s.peak("float32") > 0 and s.peak("bfloat16") == s.peak("float16")
        assert s.peaks["tf32"] >= s.peaks["fp32"]
    h100 = get_spec("H100 SXM")
    # H100 SXM5 datasheet, dense (the sparse figures are 1979 / 3958 TFLOPS).
    assert h100.memory_bandwidth == 3.35e12 and h100.peak("float16") == pytest.approx(989.4e12)
    assert h100.peak("fp8") == pytest.approx(1978.9e12) and h100.peak("int8") == pytest.approx(1978.9e12)
    assert h100.peak("float32") == pytest.approx(67e12)  # CUDA cores: TF32 drops mantissa bits
    assert h100.peak("float64") == pytest.approx(67e12)  # fp64 tensor cores are IEEE fp64
    assert h100.limit("float32") == pytest.approx(494.7e12)  # but a kernel may split fp32 over TF32
    assert h100.ridge("float16") == pytest.approx(989.4e12 / 3.35e12)
    assert get_spec("A100 SXM 80GB").peak("fp8") == pytest.approx(19.5e12)  # no fp8: falls back to fp32
    assert dtype_key("torch.bfloat16") == "bf16" and dtype_key("float8_e4m3fn") == "fp8"


def test_lookup_by_name_alias_and_torch_name():
    assert get_spec("h100-sxm").name == "H100 SXM"
    assert get_spec("H100").name == "H100 SXM"
    assert get_spec("NVIDIA H100 PCIe").name == "H100 PCIe"
    with pytest.raises(wb.UnknownNameError, match="H100 SXM") as err:
        get_spec("TPU v5")
    assert "cpu" in err.value.known


def test_registered_spec_is_found_by_its_torch_name():
    custom = DeviceSpec("Lab GPU X1", "Lab", {"fp32": 10e12, "fp16": 40e12}, 1e12, requires=("x1",))
    register_spec(custom)
    try:
        assert match_device_name("Lab GPU X1 48GB") is custom
        assert get_spec("lab gpu x1") is custom
    finally:
        from roofline import specs as S

        S._REGISTRY.pop("Lab GPU X1")


def test_cpu_ceilings_measured_once_and_cached(cache):
    first = C.get_ceilings("cpu")
    assert first.device == "cpu" and first.device_name.startswith("cpu: ")
    assert first.copy_bandwidth > 1e8 and first.matmul_flops["fp32"] > 1e8 and first.matmul_flops["fp64"] > 1e7
    assert first.details["copy_bytes_per_buffer"] >= 64 << 20  # past the last-level cache: DRAM, not L3
    path = C.cache_path("cpu")
    assert path.parent == cache / "ceilings" and path.exists() and first.key in path.name
    assert C.get_ceilings("cpu") == first  # read back, not measured again
    assert C.load_cached("cpu") == first
    # The cache is what is returned: planting a value in it shows up, and refresh measures again.
    planted = {**first.to_dict(), "copy_bandwidth": 123.0}
    path.write_text(json.dumps(planted))
    assert C.get_ceilings("cpu").copy_bandwidth == 123.0
    fresh = C.get_ceilings("cpu", refresh=True)
    assert fresh.copy_bandwidth > 1e8 and C.get_ceilings("cpu").copy_bandwidth == fresh.copy_bandwidth
    path.write_text("{not json")
    assert C.load_cached("cpu") is None  # a corrupt file is remeasured, never half-read


def test_cache_key_covers_device_driver_and_versions():
    ident = C.device_identity("cpu")
    assert {"name", "driver", "torch", "triton", "schema"} <= set(ident)
    name, key = C.device_key("cpu")
    assert name == ident["name"] and len(key) == 16 and C.device_key("cpu") == (name, key)


def test_cpu_spec_is_measured_not_tabled(cache):
    spec = detect("cpu")
    c = C.get_ceilings("cpu")
    assert spec.measured and spec.name == "cpu" and spec.vendor == "measured"
    assert spec.memory_bandwidth == c.copy_bandwidth and spec.peak("float32") == c.matmul_flops["fp32"]
    assert spec.peak("float64") == c.matmul_flops["fp64"] and spec.peak("float16") == c.matmul_flops["fp32"]
    assert get_spec("cpu") == spec and "measured" in spec.notes
    unknown = from_ceilings(C.Ceilings("Future GPU", 2e12, {"fp16": 5e14, "fp32": 5e13}))
    assert unknown.measured and unknown.peak("float16") == 5e14 and "not physical limits" in unknown.notes


def test_kwb_ceilings_command_prints_measured_beside_datasheet(cache, capsys):
    parser = argparse.ArgumentParser(prog="kwb")
    add_cli(parser.add_subparsers())
    assert add_ceilings_commands is add_cli
    args = parser.parse_args(["ceilings", "--device", "cpu"])
    assert args.handler(args) == 0
    out = capsys.readouterr().out
    assert "copy (read+write)" in out and "matmul fp32" in out and "datasheet: none" in out
    args = parser.parse_args(["ceilings", "--device", "cpu", "--json"])
    assert args.handler(args) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["ceilings"]["copy_bandwidth"] == C.get_ceilings("cpu").copy_bandwidth and data["datasheet"] is None
    # Against a datasheet: ratio column = measured / datasheet.
    fake = C.Ceilings("NVIDIA H100 80GB HBM3", 3.0e12, {"fp16": 700e12, "tf32": 370e12}, device="cuda")
    table = ceilings_table(fake, get_spec("H100 SXM"))
    assert "3000 GB/s" in table and "3350 GB/s" in table and f"{3.0 / 3.35:.2f}" in table
    assert f"{700 / 989.4:.2f}" in table and "dense" in table
