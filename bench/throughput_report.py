"""The printed table and target checks of bench/throughput.py."""

from __future__ import annotations

from typing import Any

from throughput_libs import CONCURRENCIES, SYNC_CONCURRENCY


def fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    if unit == "ms":
        return f"{value:.2f}"
    return f"{value:,.0f}"


def table_rows(bp: dict[str, Any], bm: dict[str, Any] | None) -> list[dict[str, Any]]:
    """measure, Bullpen, BullMQ, ratio (> 1 = Bullpen better) rows."""
    rows: list[dict[str, Any]] = []

    def add(
        measure: str,
        unit: str,
        ours: float | None,
        theirs: float | None,
        higher_is_better: bool,
    ) -> None:
        ratio = None
        if ours and theirs:
            ratio = ours / theirs if higher_is_better else theirs / ours
        rows.append(
            {
                "measure": measure,
                "unit": unit,
                "bullpen": ours,
                "bullmq": theirs,
                "ratio": ratio,
            }
        )

    def proc(lib: dict[str, Any] | None, key: str, field: str) -> float | None:
        if lib is None or key not in lib["processing"]:
            return None
        value: float | None = lib["processing"][key][field]
        return value

    def pick(lib: dict[str, Any] | None, field: str) -> float | None:
        return lib["pickup"][field] if lib and lib.get("pickup") else None

    n = None
    for lib in (bp, bm):
        if lib and lib["processing"]:
            n = next(iter(lib["processing"].values()))["jobs"]
    add(
        f"bulk add {n or ''} jobs (jobs/s, median of runs)",
        "jobs/s",
        bp["bulk_add_jobs_per_s"],
        bm["bulk_add_jobs_per_s"] if bm else None,
        True,
    )
    for c in CONCURRENCIES:
        add(
            f"process c={c} (jobs/s)",
            "jobs/s",
            proc(bp, f"c{c}", "jobs_per_s"),
            proc(bm, f"c{c}", "jobs_per_s"),
            True,
        )
    add(
        f"process c={SYNC_CONCURRENCY}, def processor (jobs/s)",
        "jobs/s",
        proc(bp, f"c{SYNC_CONCURRENCY}-def", "jobs_per_s"),
        proc(bm, f"c{SYNC_CONCURRENCY}", "jobs_per_s"),
        True,
    )
    for c in CONCURRENCIES:
        add(
            f"worker CPU c={c} (us/job)",
            "us/job",
            proc(bp, f"c{c}", "cpu_us_per_job"),
            proc(bm, f"c{c}", "cpu_us_per_job"),
            False,
        )
    add(
        f"worker CPU c={SYNC_CONCURRENCY}, def processor (us/job)",
        "us/job",
        proc(bp, f"c{SYNC_CONCURRENCY}-def", "cpu_us_per_job"),
        proc(bm, f"c{SYNC_CONCURRENCY}", "cpu_us_per_job"),
        False,
    )
    for c in CONCURRENCIES:
        add(
            f"redis-server CPU c={c} (us/job)",
            "us/job",
            proc(bp, f"c{c}", "redis_cpu_us_per_job"),
            proc(bm, f"c{c}", "redis_cpu_us_per_job"),
            False,
        )
    add("pickup p50 (ms)", "ms", pick(bp, "p50_ms"), pick(bm, "p50_ms"), False)
    add("pickup p99 (ms)", "ms", pick(bp, "p99_ms"), pick(bm, "p99_ms"), False)
    add(
        "pickup p50, processedOn-timestamp (ms)",
        "ms",
        pick(bp, "redis_p50_ms"),
        pick(bm, "redis_p50_ms"),
        False,
    )
    add(
        "pickup p99, processedOn-timestamp (ms)",
        "ms",
        pick(bp, "redis_p99_ms"),
        pick(bm, "redis_p99_ms"),
        False,
    )
    return rows


def print_table(rows: list[dict[str, Any]], with_bullmq: bool) -> None:
    header: tuple[str, ...] = ("measure", "Bullpen", "BullMQ", "ratio")
    body: list[tuple[str, ...]] = [
        (
            r["measure"],
            fmt(r["bullpen"], r["unit"]),
            fmt(r["bullmq"], r["unit"]),
            f"{r['ratio']:.2f}x" if r["ratio"] else "-",
        )
        for r in rows
    ]
    if not with_bullmq:
        header, body = header[:2], [row[:2] for row in body]
    widths = [max(len(row[i]) for row in [header, *body]) for i in range(len(header))]
    line = "+".join("-" * (w + 2) for w in widths)
    print(
        " | ".join(
            h.ljust(w) if i == 0 else h.rjust(w)
            for i, (h, w) in enumerate(zip(header, widths, strict=False))
        )
    )
    print(line)
    for row in body:
        print(
            " | ".join(
                c.ljust(w) if i == 0 else c.rjust(w)
                for i, (c, w) in enumerate(zip(row, widths, strict=False))
            )
        )


def targets(bp: dict[str, Any], bm: dict[str, Any] | None) -> list[str]:
    """The issue's targets that this run can check."""
    out = []
    ours = bp["processing"].get("c50", {}).get("jobs_per_s")
    if bm and ours and bm["processing"].get("c50"):
        ratio = ours / bm["processing"]["c50"]["jobs_per_s"]
        out.append(
            f"processing at c=50 >= 1.0x BullMQ: {ratio:.2f}x "
            f"({'met' if ratio >= 1.0 else 'NOT met'})"
        )
    if bm and bp.get("pickup") and bm.get("pickup"):
        a, b = bp["pickup"]["p99_ms"], bm["pickup"]["p99_ms"]
        out.append(
            f"pickup p99 no worse than BullMQ: {a:.2f} ms vs {b:.2f} ms "
            f"({'met' if a <= b else 'NOT met'})"
        )
    return out


# --- main -------------------------------------------------------------------------
