"""Telemetry: throttle-reason decoding, the per-batch throttle verdict, and the sampler replaying recorded H100 NVML
readings (tests/data/nvml_*.json) through a fake pynvml, so no GPU or driver is needed."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from workbench.eval.judge.timing import telemetry
from workbench.eval.judge.timing.telemetry import Telemetry, decode_throttle_reasons, judge_batch

DATA = Path(__file__).parent / "data"
H100_DEFAULT_SM = 1980


def _fixture(name: str) -> dict[str, Any]:
    return json.loads((DATA / f"nvml_{name}.json").read_text())


class FakeNVMLError(Exception):
    pass


class FakeNvml:
    """The pynvml functions Telemetry calls, answering from a recorded fixture. `load(reading)` sets what the next
    queries return; names listed in `unsupported` raise like NVML_ERROR_NOT_SUPPORTED."""

    NVML_CLOCK_SM, NVML_CLOCK_MEM, NVML_TEMPERATURE_GPU = 1, 2, 0
    HANDLE = object()

    def __init__(self, fixture: dict[str, Any], *, init_error: str | None = None, unsupported: tuple[str, ...] = ()):
        self.device = fixture["device"]
        self.init_error, self.unsupported = init_error, unsupported
        self.reading: dict[str, Any] = {}
        self.now = 0.0
        self.shutdowns = 0

    def load(self, reading: dict[str, Any]) -> None:
        self.reading, self.now = reading, reading["t_s"]

    def _query(self, name: str, handle: object, value: Any) -> Any:
        assert handle is self.HANDLE
        if name in self.unsupported:
            raise FakeNVMLError("Not Supported")
        return value

    def nvmlInit(self) -> None:
        if self.init_error:
            raise FakeNVMLError(self.init_error)

    def nvmlShutdown(self) -> None:
        self.shutdowns += 1

    def nvmlDeviceGetHandleByIndex(self, index: int) -> object:
        if index != 0:
            raise FakeNVMLError("Invalid Argument")
        return self.HANDLE

    def nvmlDeviceGetHandleByUUID(self, uuid: str) -> object:
        if uuid != self.device["uuid"]:
            raise FakeNVMLError("Not Found")
        return self.HANDLE

    def nvmlDeviceGetName(self, h):
        return self._query("nvmlDeviceGetName", h, self.device["name"].encode())  # older pynvml returns bytes

    def nvmlDeviceGetMaxClockInfo(self, h, clock):
        return self._query("nvmlDeviceGetMaxClockInfo", h,
                           {1: self.device["max_sm_clock_mhz"], 2: self.device["max_mem_clock_mhz"]}[clock])

    def nvmlDeviceGetDefaultApplicationsClock(self, h, clock):
        return self._query("nvmlDeviceGetDefaultApplicationsClock", h,
                           {1: self.device["default_sm_clock_mhz"], 2: self.device["default_mem_clock_mhz"]}[clock])

    def nvmlDeviceGetEnforcedPowerLimit(self, h):
        return self._query("nvmlDeviceGetEnforcedPowerLimit", h, self.device["power_limit_mw"])

    def nvmlDeviceGetClockInfo(self, h, clock):
        return self._query("nvmlDeviceGetClockInfo", h, {1: self.reading["sm_clock_mhz"],
                                                          2: self.reading["mem_clock_mhz"]}[clock])

    def nvmlDeviceGetPowerUsage(self, h):
        return self._query("nvmlDeviceGetPowerUsage", h, self.reading["power_mw"])

    def nvmlDeviceGetTemperature(self, h, sensor):
        assert sensor == self.NVML_TEMPERATURE_GPU
        return self._query("nvmlDeviceGetTemperature", h, self.reading["temperature_c"])

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, h):
        return self._query("nvmlDeviceGetCurrentClocksThrottleReasons", h, self.reading["throttle_mask"])


def _replay(name: str, keep_power_capped: bool = False, **fake_kwargs: Any
            ) -> tuple[Telemetry, FakeNvml, dict[str, Any]]:
    fixture = _fixture(name)
    fake = FakeNvml(fixture, **fake_kwargs)
    tel = Telemetry(nvml=fake, clock=lambda: fake.now, keep_power_capped=keep_power_capped)
    for batch in fixture["batches"]:
        fake.load(batch["before"])
        before = tel.sample()
        fake.load(batch["after"])
        tel.record_batch(before, tel.sample())
    return tel, fake, fixture


# ---- decoding and judging ------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("mask", "names"), [
    (0x0, []),
    (0x1, ["gpu_idle"]),
    (0x4, ["sw_power_cap"]),
    (0x60, ["sw_thermal_slowdown", "hw_thermal_slowdown"]),
    (0x88, ["hw_slowdown", "hw_power_brake_slowdown"]),
    (0x112, ["applications_clocks_setting", "sync_boost", "display_clock_setting"]),
    (0x1FF, ["gpu_idle", "applications_clocks_setting", "sw_power_cap", "hw_slowdown", "sync_boost",
             "sw_thermal_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown", "display_clock_setting"]),
    (0x1000 | 0x40, ["hw_thermal_slowdown", "unknown_0x1000"]),
])
def test_decode_known_throttle_masks(mask, names):
    assert decode_throttle_reasons(mask) == names


def test_the_bit_table_matches_pynvml_where_it_is_installed():
    pynvml = pytest.importorskip("pynvml")
    for bit, name in telemetry.THROTTLE_REASONS.items():
        camel = "".join(part.capitalize() for part in name.split("_"))
        assert getattr(pynvml, f"nvmlClocksThrottleReason{camel}") == bit


def _s(sm: float | None, mask: int = 0) -> dict[str, Any]:
    return {"t_s": 0.0, "sm_clock_mhz": sm, "mem_clock_mhz": 2619, "power_w": 400.0, "temperature_c": 50,
            "throttle_mask": mask, "throttle_reasons": decode_throttle_reasons(mask)}


@pytest.mark.parametrize(("before", "after", "ok", "reasons"), [
    (_s(1980), _s(1980), True, ()),
    (_s(345, 0x1), _s(1980), True, ()),  # idle before the batch: its clock is not the batch's
    (_s(1980, 0x10), _s(1980, 0x12), True, ()),  # sync boost, applications clocks: benign
    (_s(1980), _s(1485), True, ()),  # exactly 75% of 1980 is still in
    (_s(1980), _s(1484), False, ("sm_clock 1484 MHz < 75% of 1980 MHz",)),
    (_s(1980), _s(1755, 0x4), True, ("sw_power_cap",)),  # flagged, kept
    (_s(1980, 0x20), _s(1900), False, ("sw_thermal_slowdown",)),  # a slowdown at either end drops the batch
    (_s(1980), _s(1980, 0x80), False, ("hw_power_brake_slowdown",)),
    (_s(1980), _s(1980, 0x800), True, ("unknown_0x800",)),
    (telemetry.unavailable("no NVML"), _s(1300), False, ("sm_clock 1300 MHz < 75% of 1980 MHz",)),
    (telemetry.unavailable("no NVML"), telemetry.unavailable("no NVML"), True, ("telemetry-unavailable",)),
])
def test_judge_batch(before, after, ok, reasons):
    assert judge_batch(before, after, H100_DEFAULT_SM) == (ok, reasons)


@pytest.mark.parametrize(("before", "after", "ok"), [
    (_s(1980), _s(1300, 0x4), True),  # power-capped low clock: kept (flagged)
    (_s(1300, 0x4), _s(1300, 0x4), True),
    (_s(1300), _s(1980, 0x4), False),  # the low clock was read without the power cap bit
    (_s(1980), _s(1300, 0x24), False),  # power cap and thermal slowdown: thermal drops it anyway
])
def test_keep_power_capped_rescues_only_a_clock_lowered_by_the_power_cap(before, after, ok):
    assert judge_batch(before, after, H100_DEFAULT_SM, keep_power_capped=True)[0] is ok
    assert judge_batch(before, after, H100_DEFAULT_SM)[0] is False


def test_without_a_default_clock_only_the_reasons_judge():
    assert judge_batch(_s(900), _s(900), None) == (True, ())
    assert judge_batch(_s(900), _s(900, 0x40), None) == (False, ("hw_thermal_slowdown",))


# ---- the sampler on recorded H100 readings -------------------------------------------------------------------------

def test_steady_h100_samples_convert_units_and_keep_every_batch():
    tel, fake, fixture = _replay("h100_steady")
    assert tel.available and tel.device_name == "NVIDIA H100 80GB HBM3"
    assert (tel.default_sm_clock_mhz, tel.max_sm_clock_mhz, tel.power_limit_w) == (1980, 1980, 700.0)
    first = tel.batches[0]
    assert first.before == {"t_s": 0.0, "sm_clock_mhz": 345, "mem_clock_mhz": 2619, "power_w": 71.234,
                            "temperature_c": 33, "throttle_mask": 1, "throttle_reasons": ["gpu_idle"]}
    assert first.after["power_w"] == 412.876 and first.after["t_s"] == 0.052
    assert [(b.ok, b.reasons) for b in tel.batches] == [(True, ())] * 6

    summary = tel.summary()
    assert summary["status"] == "ok" and summary["device"] == "NVIDIA H100 80GB HBM3"
    assert (summary["n_batches"], summary["dropped_batches"], summary["flagged_batches"]) == (6, 0, 0)
    assert summary["sm_clock_mhz"] == {"min": 1965.0, "median": 1980.0}  # the idle 345 MHz sample is left out
    assert summary["mem_clock_mhz"] == {"min": 2619.0, "median": 2619.0}
    assert summary["max_temperature_c"] == 47.0
    busy_power = sorted(s["power_mw"] / 1000 for b in fixture["batches"] for s in (b["before"], b["after"])
                        if s["throttle_mask"] != 1)
    assert summary["power_w"] == {"median": pytest.approx(busy_power[5]), "max": 436.12}
    assert (summary["default_sm_clock_mhz"], summary["throttle_threshold"], summary["power_limit_w"]) == (1980, 0.75,
                                                                                                          700.0)
    assert len(summary["batches"]) == 6 and summary["batches"][3]["after"]["throttle_reasons"] == ["sync_boost"]
    assert json.loads(json.dumps(summary)) == summary  # goes into Result.telemetry and the store as JSON


def test_throttled_h100_batches_are_dropped_or_flagged_for_the_right_reasons():
    tel, _, _ = _replay("h100_throttled")
    assert [(b.ok, b.reasons) for b in tel.batches] == [
        (True, ()),
        (True, ("sw_power_cap",)),  # power cap at 1755 MHz: above 1485, kept
        (False, ("sw_power_cap", "sm_clock 1410 MHz < 75% of 1980 MHz")),
        (False, ("sw_thermal_slowdown", "hw_thermal_slowdown", "sm_clock 1305 MHz < 75% of 1980 MHz")),
        (False, ("hw_slowdown", "hw_power_brake_slowdown", "sm_clock 1095 MHz < 75% of 1980 MHz")),
        (True, ()),  # applications_clocks_setting only
    ]
    summary = tel.summary()
    assert (summary["dropped_batches"], summary["flagged_batches"]) == (3, 1)
    assert summary["reasons"] == sorted({"sw_power_cap", "sw_thermal_slowdown", "hw_thermal_slowdown", "hw_slowdown",
                                         "hw_power_brake_slowdown", "sm_clock 1410 MHz < 75% of 1980 MHz",
                                         "sm_clock 1305 MHz < 75% of 1980 MHz",
                                         "sm_clock 1095 MHz < 75% of 1980 MHz"})
    assert summary["sm_clock_mhz"]["min"] == 1095.0 and summary["max_temperature_c"] == 89.0
    assert summary["power_w"]["max"] == pytest.approx(700.104)


def test_a_recorded_power_limited_gemm_loses_every_batch_to_the_clock_rule_unless_power_cap_is_kept():
    tel, _, fixture = _replay("h100_power_limited")
    lows = [min(b["before"]["sm_clock_mhz"], b["after"]["sm_clock_mhz"]) for b in fixture["batches"]]
    assert lows == [1440, 1440, 1440, 1440, 1440, 1140, 1140, 1320]
    assert [(b.ok, b.reasons) for b in tel.batches] == [
        (False, ("sw_power_cap", f"sm_clock {low} MHz < 75% of 1980 MHz")) for low in lows]
    assert tel.summary()["dropped_batches"] == 8

    kept, _, _ = _replay("h100_power_limited", keep_power_capped=True)
    summary = kept.summary()
    assert (summary["dropped_batches"], summary["flagged_batches"], summary["keep_power_capped"]) == (0, 8, True)
    assert summary["sm_clock_mhz"]["min"] == 1140.0 and summary["power_w"]["max"] == pytest.approx(719.768)
    assert summary["max_temperature_c"] == 67.0


def test_a_field_the_gpu_does_not_report_is_none_and_the_rest_still_count():
    tel, _, _ = _replay("h100_steady", unsupported=("nvmlDeviceGetPowerUsage", "nvmlDeviceGetDefaultApplicationsClock"))
    assert tel.default_sm_clock_mhz == 1980  # falls back to the max clock
    assert tel.batches[1].after["power_w"] is None and tel.batches[1].after["sm_clock_mhz"] == 1980
    summary = tel.summary()
    assert summary["power_w"] is None and summary["sm_clock_mhz"]["min"] == 1965.0


def test_a_binding_with_only_the_clock_event_reasons_name():
    class NewNames(FakeNvml):
        nvmlDeviceGetCurrentClocksThrottleReasons = None  # removed in newer NVML

        def nvmlDeviceGetCurrentClocksEventReasons(self, h):
            return self._query("nvmlDeviceGetCurrentClocksEventReasons", h, self.reading["throttle_mask"])

    fixture = _fixture("h100_throttled")
    fake = NewNames(fixture)
    tel = Telemetry(nvml=fake)
    fake.load(fixture["batches"][3]["after"])
    assert tel.sample()["throttle_reasons"] == ["sw_thermal_slowdown", "hw_thermal_slowdown"]


def test_uuid_selects_the_device_with_or_without_the_prefix():
    fixture = _fixture("h100_steady")
    bare = fixture["device"]["uuid"].removeprefix("GPU-")
    assert Telemetry(uuid=bare, nvml=FakeNvml(fixture)).available
    assert telemetry.nvml_uuid("MIG-1234") == "MIG-1234"
    wrong = Telemetry(uuid="GPU-00000000", nvml=FakeNvml(fixture))
    assert not wrong.available and "Not Found" in wrong.reason


# ---- unavailable, never raising ------------------------------------------------------------------------------------

def _assert_unavailable(tel: Telemetry, why: str) -> None:
    assert not tel.available and why in tel.reason
    sample = tel.sample()
    assert sample == {"status": "unavailable", "reason": tel.reason}
    assert tel.record_batch(sample, tel.sample()).ok
    assert tel.summary() == {"status": "unavailable", "reason": tel.reason}


def test_without_pynvml_everything_is_unavailable(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # makes `import pynvml` fail like a missing package
    _assert_unavailable(Telemetry(), "pip install 'kernel-workbench[gpu]'")


def test_without_a_driver_everything_is_unavailable():
    fake = FakeNvml(_fixture("h100_steady"), init_error="Driver Not Loaded")
    _assert_unavailable(Telemetry(nvml=fake), "Driver Not Loaded")
    assert fake.shutdowns == 0  # init failed: nothing to shut down


def test_without_the_device_everything_is_unavailable_and_nvml_is_shut_down():
    fake = FakeNvml(_fixture("h100_steady"))
    _assert_unavailable(Telemetry(3, nvml=fake), "Invalid Argument")
    assert fake.shutdowns == 1


def test_close_shuts_down_once_and_later_samples_are_unavailable():
    fake = FakeNvml(_fixture("h100_steady"))
    with Telemetry(nvml=fake) as tel:
        assert tel.available
    tel.close()
    assert fake.shutdowns == 1 and tel.sample()["status"] == "unavailable"


def test_a_summary_of_batches_without_samples_is_unavailable():
    none = telemetry.unavailable("no NVML here")
    batch = telemetry.BatchTelemetry(0, none, none, True, ("telemetry-unavailable",))
    assert telemetry.summarize_batches([batch], None) == {"status": "unavailable", "reason": "no NVML here"}
    assert telemetry.summarize_batches([], 1980)["status"] == "unavailable"
