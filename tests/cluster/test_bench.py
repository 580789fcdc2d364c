"""The cluster benchmarks still run: bench/throughput.py --compare-cluster and
bench/fleet.py, each at a tiny size on servers they start themselves."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run_bench(args: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_throughput_compares_a_cluster_with_one_node(tmp_path: Path) -> None:
    """Both runs finish every job; the queues land on all three primaries; the
    ratio and the core count are printed."""
    out = tmp_path / "tp.json"
    done = run_bench(
        [
            "bench/throughput.py",
            "--compare-cluster",
            "--jobs",
            "200",
            "--rounds",
            "1",
            "--concurrency",
            "5",
            "--output",
            str(out),
        ],
        120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "ratio cluster/single (jobs/s):" in done.stdout
    assert "CPU cores" in done.stdout
    result = json.loads(out.read_text())
    for label in ("single", "cluster"):
        best = result["best"][label]
        assert best["completed"] == 200 and not best["timed_out"]
        assert len(best["queues"]) == 4
    assert len(set(result["best"]["single"]["queues"].values())) == 1
    assert len(set(result["best"]["cluster"]["queues"].values())) == 3
    assert result["best"]["cluster"]["primaries"] == 3


def test_fleet_model_measures_both_backends(tmp_path: Path) -> None:
    """One simulated host of 4 GPUs on one node and on a cluster: heartbeats
    reach Redis, the GPU page and /metrics answer on one node, every job of
    the load completes on both."""
    out = tmp_path / "fleet.json"
    done = run_bench(
        [
            "bench/fleet.py",
            "--sizes",
            "4",
            "--gpus-per-host",
            "4",
            "--settle-s",
            "0.5",
            "--idle-s",
            "1",
            "--requests",
            "2",
            "--jobs",
            "40",
            "--output",
            str(out),
        ],
        180,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    rows = {r["backend"]: r for r in json.loads(out.read_text())["rows"]}
    assert set(rows) == {"single", "cluster"}
    for row in rows.values():
        assert row["sim"]["running"] == 4, row
        assert row["heartbeat"]["records"] == 5  # one host, four workers
        assert row["idle"]["commands_per_s"] > 0
        assert row["load"]["completed"] == 40 and row["load"]["failed"] == 0, row
    assert rows["single"]["gpu_page"]["statuses"] == {"200": 2}
    assert rows["single"]["metrics"]["statuses"] == {"200": 2}
    assert "error" not in rows["single"]["metrics"]
