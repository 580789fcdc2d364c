"""GPU probes: NVML on recorded readings (a fake pynvml injected into
NvmlProbe), simulated devices, and the CPU-only fallback."""

from __future__ import annotations

import logging

import pytest

from gpu_workers.exceptions import ConfigError, ProbeError, SimulatedOutOfMemory
from gpu_workers.probe import (
    CpuOnlyProbe,
    GpuProbe,
    NvmlProbe,
    SimulatedProbe,
    make_probe,
    parse_sim_spec,
)
from tests.gpu_workers.fake_nvml import H200_UUID, FakeNvml


def test_nvml_probe_reads_recorded_h200() -> None:
    """Every reading of the recorded H200 comes through, in base units."""
    probe = NvmlProbe(FakeNvml("nvml_h200.json"))
    assert isinstance(probe, GpuProbe)
    assert probe.driver_version == "580.159.04"
    [info] = probe.devices()
    assert (info.index, info.uuid, info.name) == (0, H200_UUID, "NVIDIA H200")
    assert info.pci_bus_id == "00000000:19:00.0"
    assert info.memory_total_bytes == 150_754_820_096 and not info.simulated
    snap = probe.snapshot(H200_UUID)
    assert snap.memory_used_bytes == 1_203_765_248
    assert snap.memory_reserved_bytes == 645_005_312
    assert snap.temperature_c == 39
    assert snap.power_w == pytest.approx(88.145)
    assert snap.power_limit_w == pytest.approx(700.0)
    assert snap.sm_clock_mhz == 1980
    assert snap.utilization_gpu_pct == 0 and snap.ecc_uncorrected_volatile == 0
    assert snap.processes == {41001: 22_000_000_000, 41002: 22_000_000_000}
    assert snap.xid_count == 0 and snap.xid_last is None
    assert snap.to_dict()["processes"] == {
        "41001": 22_000_000_000,
        "41002": 22_000_000_000,
    }


def test_nvml_probe_reads_an_h200_recorded_by_the_device_check() -> None:
    """The fixture bench/gpu_device.sh recorded on a lent H200 (2026-12-04,
    idle, no process): the readings nvidia-smi showed beside it (143771 MiB,
    616 MiB reserved, 37 C, 80.8 W of 700 W, 345 MHz)."""
    probe = NvmlProbe(FakeNvml("nvml_h200_recorded.json"))
    [info] = probe.devices()
    assert info.name == "NVIDIA H200" and info.pci_bus_id == "00000000:00:06.0"
    assert info.memory_total_bytes // 2**20 == 143771
    snap = probe.snapshot(info.uuid)
    assert snap.memory_reserved_bytes // 2**20 == 615
    assert snap.memory_used_bytes == snap.memory_reserved_bytes
    assert round(snap.memory_free_bytes / 2**20) == 143156
    assert (snap.temperature_c, snap.sm_clock_mhz) == (37, 345)
    assert snap.power_w == pytest.approx(80.867)
    assert snap.power_limit_w == pytest.approx(700.0)
    assert snap.processes == {} and snap.xid_count == 0


def test_nvml_probe_per_process_memory_by_pid() -> None:
    """Per-process memory is read by pid (how workers measure job peaks)."""
    nvml = FakeNvml("nvml_h200.json")
    probe = NvmlProbe(nvml)
    nvml.set_process_memory(0, 777, 5 * 2**30)
    assert probe.process_memory(H200_UUID)[777] == 5 * 2**30


def test_nvml_probe_xid_events() -> None:
    """Pending XID critical events are collected at each snapshot."""
    nvml = FakeNvml("nvml_h200.json")
    probe = NvmlProbe(nvml)
    nvml.xid_events.extend([(0, 79), (0, 48)])
    snap = probe.snapshot(H200_UUID)
    assert (snap.xid_last, snap.xid_count) == (48, 2)


def test_nvml_probe_falls_back_on_old_driver() -> None:
    """Without memory v2, utilisation, ECC or per-process memory the reading
    has None there instead of failing."""
    probe = NvmlProbe(FakeNvml("nvml_old_driver_2gpu.json"))
    first, second = probe.devices()
    assert second.index == 1 and second.uuid.startswith("GPU-6666")
    snap = probe.snapshot(first.uuid)
    assert snap.memory_reserved_bytes is None
    assert snap.utilization_gpu_pct is None and snap.ecc_uncorrected_volatile is None
    assert snap.processes == {5150: None}
    assert snap.temperature_c == 45
    with pytest.raises(ProbeError):
        probe.snapshot("GPU-not-here")


def test_make_probe_without_driver_is_cpu_only(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """No driver and no simulation configured: CPU-only with a clear log line."""
    with caplog.at_level(logging.WARNING, logger="gpu_workers.probe"):
        probe = make_probe("auto", nvml=FakeNvml("nvml_h200.json", fail_init=True))
    assert isinstance(probe, CpuOnlyProbe) and probe.devices() == []
    assert "running CPU-only" in caplog.text and "BULLPEN_GPUS=sim" in caplog.text


def test_make_probe_with_driver_uses_nvml() -> None:
    """`auto` with a working driver is NVML."""
    probe = make_probe("auto", nvml=FakeNvml("nvml_h200.json"))
    assert probe.kind == "nvml" and len(probe.devices()) == 1


def test_simulated_probe_is_marked_and_tracks_memory() -> None:
    """`sim:2x24GiB` gives two devices, marked simulated, named per host."""
    probe = make_probe("sim:2x24GiB", host="node-a")
    assert isinstance(probe, SimulatedProbe) and probe.simulated
    devices = probe.devices()
    assert [d.uuid for d in devices] == ["SIM-node-a-0", "SIM-node-a-1"]
    assert all(d.simulated and d.memory_total_bytes == 24 * 2**30 for d in devices)
    mem = probe.open("SIM-node-a-0", context_bytes=512 * 2**20)
    mem.allocate(10 * 2**30)
    snap = probe.snapshot("SIM-node-a-0")
    assert snap.simulated and snap.memory_used_bytes == 10 * 2**30 + 512 * 2**20
    with pytest.raises(SimulatedOutOfMemory, match="CUDA out of memory"):
        mem.allocate(20 * 2**30)
    mem.free(10 * 2**30)
    assert probe.snapshot("SIM-node-a-0").memory_used_bytes == 512 * 2**20


def test_simulated_gpu_is_busy_only_while_a_job_holds_memory() -> None:
    """A CUDA context and resident weights run no kernels: the device reads
    idle (0 %, 35 C) until a job allocates, busy (100 %, 70 C) while it
    holds memory, idle again once it gave it back. (Every idle simulated GPU
    of `make run` once read 100 %: its context counted as work.)"""
    probe = make_probe("sim:1x24GiB", host="node-a")
    uuid = "SIM-node-a-0"

    def reading() -> tuple[int | None, int | None]:
        snap = probe.snapshot(uuid)
        return snap.utilization_gpu_pct, snap.temperature_c

    assert reading() == (0, 35)  # not opened: nothing of this process's
    mem = probe.open(uuid, context_bytes=512 * 2**20)
    mem.allocate(4 * 2**30)  # a model's resident weights
    assert reading() == (0, 35)
    mem.allocate(2 * 2**30, job=True)
    assert reading() == (100, 70)
    assert probe.snapshot(uuid).memory_used_bytes == (6 * 2**30) + 512 * 2**20
    mem.free(2 * 2**30, job=True)
    assert reading() == (0, 35) and mem.job_bytes == 0
    mem.free(4 * 2**30)
    assert probe.snapshot(uuid).memory_used_bytes == 512 * 2**20


def test_sim_spec_parsing() -> None:
    """Counts, lists and mixes; nonsense is a ConfigError."""
    assert parse_sim_spec("sim:24GiB,80GiB") == [24 * 2**30, 80 * 2**30]
    assert parse_sim_spec("sim:1x24GiB,2x80GiB") == [24 * 2**30] + [80 * 2**30] * 2
    for bad in ("sim:", "sim:0x24GiB", "sim:2xlots", "24GiB"):
        with pytest.raises(ConfigError):
            parse_sim_spec(bad)
    with pytest.raises(ConfigError):
        make_probe("cuda-please")
