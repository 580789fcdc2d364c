"""The printed table and target checks of bench/throughput.py."""

from __future__ import annotations

import statistics
from typing import Any

from throughput_adds import MODES
from throughput_libs import CONCURRENCIES, SYNC_CONCURRENCY

#: The issue's bars (median ratio of the runs, Bullpen/BullMQ): row key -> bar.
BARS = {
    "single_sync": 1.0,
    "single_async": 1.0,
    "concurrent": 1.5,
    "bulk_add": 1.2,
    "c1": 1.0,
    "c10": 1.2,
    "c50": 1.5,
}


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
        key: str = "",
    ) -> None:
        ratio = None
        if ours and theirs:
            ratio = ours / theirs if higher_is_better else theirs / ours
        rows.append(
            {
                "key": key or measure,
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
        "bulk_add",
    )
    for key, label in MODES.items():
        add(
            label,
            "adds/s",
            (bp.get("adds") or {}).get(key),
            ((bm or {}).get("adds") or {}).get(key),
            True,
            key,
        )
    for c in CONCURRENCIES:
        add(
            f"process c={c} (jobs/s)",
            "jobs/s",
            proc(bp, f"c{c}", "jobs_per_s"),
            proc(bm, f"c{c}", "jobs_per_s"),
            True,
            f"c{c}",
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


def print_table(
    rows: list[dict[str, Any]], with_bullmq: bool, preformatted: bool = False
) -> None:
    header: tuple[str, ...] = ("measure", "Bullpen", "BullMQ", "ratio")
    body: list[tuple[str, ...]] = [
        (r["measure"], r["bullpen"], r["bullmq"], r["ratio"])
        if preformatted
        else (
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


# --- several runs -------------------------------------------------------------------
def _spread(values: list[float], fmt_one: Any) -> str:
    """`median [min-max]` of the values, or "-"."""
    if not values:
        return "-"
    if len(values) == 1:
        return str(fmt_one(values[0]))
    return (
        f"{fmt_one(statistics.median(values))} "
        f"[{fmt_one(min(values))}-{fmt_one(max(values))}]"
    )


def summarize(runs: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """One row per measure over the runs' tables: each column's values, and
    their median."""
    out: list[dict[str, Any]] = []
    for i, first in enumerate(runs[0]):
        row: dict[str, Any] = {
            "key": first["key"],
            "measure": first["measure"],
            "unit": first["unit"],
        }
        for column in ("bullpen", "bullmq", "ratio"):
            values = [t[i][column] for t in runs if t[i][column] is not None]
            row[column + "_runs"] = values
            row[column] = statistics.median(values) if values else None
        out.append(row)
    return out


def print_summary(rows: list[dict[str, Any]], with_bullmq: bool) -> None:
    """The table of medians, each with its range [min-max] over the runs."""
    body = [
        {
            "measure": r["measure"],
            "unit": "",
            "bullpen": _spread(r["bullpen_runs"], lambda v, u=r["unit"]: fmt(v, u)),
            "bullmq": _spread(r["bullmq_runs"], lambda v, u=r["unit"]: fmt(v, u)),
            "ratio": _spread(r["ratio_runs"], lambda v: f"{v:.2f}x"),
        }
        for r in rows
    ]
    print_table(body, with_bullmq, preformatted=True)


def bars(rows: list[dict[str, Any]], runs: int) -> list[str]:
    """The issue's bars against this run's median ratios."""
    out = []
    for r in rows:
        bar = BARS.get(r["key"])
        if bar is None or r["ratio"] is None:
            continue
        spread = r.get("ratio_runs") or [r["ratio"]]
        out.append(
            f"{r['measure']} >= {bar:.1f}x BullMQ: {r['ratio']:.2f}x "
            f"(median of {runs}, range {min(spread):.2f}-{max(spread):.2f}) "
            f"{'met' if r['ratio'] >= bar else 'NOT met'}"
        )
    return out


# --- main -------------------------------------------------------------------------
