"""The report of a layout experiment: curves per layout, the Pareto front, winners per budget.

Input is the experiment and its state file (every finished point's group
result). Throughput is the group's output tokens/s divided by the nodes it
used ("per node", the unit the seeds compare layouts in); latency is the
group's merged percentile (console/core/bench/group_result.py).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from console.core.experiment.spec import Budget, Experiment, ExperimentState, plan_points
from console.core.text import printable

__all__ = ["BudgetWinner", "ExperimentReport", "ReportRow", "build_report"]

PARETO_LATENCY = ("ttft", "p99")  # the front trades tokens/s per node against p99 TTFT


@dataclass(frozen=True, slots=True)
class ReportRow:
    layout: str  # label, e.g. "SPX tp1 ×8"
    layout_key: str
    point: str  # point id
    load: float  # the group's concurrency or rate
    load_kind: str  # "concurrency" | "rate"
    replicas: int
    nodes: int
    completed: int
    failed: int
    output_tok_s: float
    total_tok_s: float
    request_s: float
    latency: Mapping[str, float]  # "p99_ttft_ms" -> value, as in the result JSON
    # Issue P: the group's output tokens per joule of its GPUs, their draw, the share of
    # GPU-seconds throttled, and whether a client was the bottleneck (None: not recorded / judged).
    tokens_per_joule: float | None = None
    avg_power_w: float | None = None
    throttled_pct: float | None = None
    client_bound: bool | None = None
    goodput_pct: float | None = None  # issue B2: requests within the preset's SLO (None: no SLO)
    prefix_cache_hit_pct: float | None = None  # prompt tokens from the prefix cache (None: not counted)
    prefix_cache_warning: str | None = None  # meant cold, but served from the cache

    @property
    def tok_s_per_node(self) -> float:
        return self.output_tok_s / max(self.nodes, 1)

    def ms(self, metric: str, stat: str) -> float | None:
        return self.latency.get(f"{stat}_{metric}_ms")


@dataclass(frozen=True, slots=True)
class BudgetWinner:
    budget: Budget
    row: ReportRow | None  # the fastest (tok/s per node) that meets it; None = no point meets the budget
    efficient: ReportRow | None = None  # the most output tokens per joule that meets it; None = no energy known


@dataclass(frozen=True, slots=True)
class ExperimentReport:
    experiment: Experiment
    rows: tuple[ReportRow, ...]
    pareto: tuple[ReportRow, ...]
    winners: tuple[BudgetWinner, ...]
    failed_layouts: Mapping[str, str]
    planned: int
    node: str
    partition_note: str | None = None  # "partition restored to SPX/NPS1 on GPU 0-7 ..." (the run's own line)

    @property
    def finished(self) -> int:
        return len(self.rows)

    def curve(self, layout_key: str) -> list[ReportRow]:
        return sorted((r for r in self.rows if r.layout_key == layout_key), key=lambda r: r.load)

    # ------------------------------------------------------------ exports

    CSV_COLUMNS = (
        "layout",
        "load_kind",
        "load",
        "replicas",
        "nodes",
        "completed",
        "failed",
        "output_tok_s",
        "output_tok_s_per_node",
        "total_tok_s",
        "request_s",
        "median_ttft_ms",
        "p99_ttft_ms",
        "median_tpot_ms",
        "p99_tpot_ms",
        "median_itl_ms",
        "p99_itl_ms",
        "median_e2el_ms",
        "p99_e2el_ms",
        "pareto",
        "tokens_per_joule",
        "avg_power_w",
        "throttled_pct",
        "client_bound",
        "energy_pareto",
        "goodput_pct",
        "prefix_cache_hit_pct",
    )

    def to_csv(self) -> str:
        out = io.StringIO()
        w = csv.writer(out, lineterminator="\n")
        w.writerow(self.CSV_COLUMNS)
        front = {r.point for r in self.pareto}
        energy_front = {r.point for r in self.energy_pareto}
        for r in self.rows:
            w.writerow(
                [
                    r.layout,
                    r.load_kind,
                    _g(r.load),
                    r.replicas,
                    r.nodes,
                    r.completed,
                    r.failed,
                    f"{r.output_tok_s:.2f}",
                    f"{r.tok_s_per_node:.2f}",
                    f"{r.total_tok_s:.2f}",
                    f"{r.request_s:.3f}",
                    *(
                        _cell(r.ms(metric, stat))
                        for metric in ("ttft", "tpot", "itl", "e2el")
                        for stat in ("median", "p99")
                    ),
                    "yes" if r.point in front else "",
                    "" if r.tokens_per_joule is None else f"{r.tokens_per_joule:.4g}",
                    "" if r.avg_power_w is None else f"{r.avg_power_w:.1f}",
                    "" if r.throttled_pct is None else f"{r.throttled_pct:.1f}",
                    "" if r.client_bound is None else ("true" if r.client_bound else "false"),
                    "yes" if r.point in energy_front else "",
                    _pct(r.goodput_pct),
                    _pct(r.prefix_cache_hit_pct),
                ]
            )
        return out.getvalue()

    @property
    def energy_pareto(self) -> tuple[ReportRow, ...]:
        """Rows no other row beats on both tok/s per node and output tokens per joule (higher both)."""
        return tuple(energy_front(self.rows))

    def to_markdown(
        self, chart: str | None = None, chart_image: str | None = None, energy_chart: str | None = None
    ) -> str:
        exp = self.experiment
        lines = [
            f"# Layout experiment {exp.name} on {self.node}",
            "",
            f"Serve preset `{exp.serve}`, benchmark preset `{exp.bench}`; "
            f"{self.finished} of {self.planned} points measured"
            + (f", {len(self.failed_layouts)} layout(s) failed" if self.failed_layouts else "")
            + ". Throughput is output tokens/s of the whole group per node; latencies are merged over every "
            "replica's requests.",
            "",
        ]
        if self.partition_note:
            lines += [f"After the run: {self.partition_note}.", ""]
        if self.winners:
            lines += [
                "## Best layout per latency budget",
                "",
                "| budget | fastest layout | load | tok/s per node | tokens/J | most efficient layout | load | tok/s per node | tokens/J |",
                "|---|---|---|---|---|---|---|---|---|",
            ]
            for w in self.winners:
                head = f"| {w.budget.name} ({w.budget.describe()}) "
                if w.row is None:
                    lines.append(head + "| none meets it | | | | | | | |")
                    continue
                fast = f"| {w.row.layout} | {w.row.load_kind} {_g(w.row.load)} | {w.row.tok_s_per_node:.1f} | {_tpj(w.row)} "
                e = w.efficient
                eff = (
                    "| energy not recorded | | | |"
                    if e is None
                    else f"| {e.layout} | {e.load_kind} {_g(e.load)} | {e.tok_s_per_node:.1f} | {_tpj(e)} |"
                )
                lines.append(head + fast + eff)
            lines.append("")
        lines += [
            "## Pareto front (tok/s per node vs p99 TTFT)",
            "",
            "| layout | load | tok/s per node | goodput % | tokens/J | p99 TTFT ms | throttled % |",
            "|---|---|---|---|---|---|---|",
        ]
        for r in self.pareto:
            lines.append(
                f"| {r.layout} | {r.load_kind} {_g(r.load)} | {r.tok_s_per_node:.1f} | {_pct(r.goodput_pct)} | {_tpj(r)} | "
                f"{_cell(r.ms('ttft', 'p99'))} | {_pct(r.throttled_pct)} |"
            )
        lines.append("")
        warned = [r for r in self.rows if r.prefix_cache_warning]
        for r in warned:  # a point meant cold that the cache served (issue B2)
            lines.append(f"WARNING: {r.layout} at {r.load_kind} {_g(r.load)}: {r.prefix_cache_warning}")
        if warned:
            lines.append("")
        if self.energy_pareto:
            lines += [
                "## Energy front (tok/s per node vs output tokens per joule)",
                "",
                "Points no other point beats on both speed and energy: right of the front is faster, "
                "above it cheaper per token.",
                "",
                "| layout | load | tok/s per node | tokens/J | avg W | p99 TTFT ms |",
                "|---|---|---|---|---|---|",
            ]
            for r in self.energy_pareto:
                lines.append(
                    f"| {r.layout} | {r.load_kind} {_g(r.load)} | {r.tok_s_per_node:.1f} | {_tpj(r)} | "
                    f"{'' if r.avg_power_w is None else f'{r.avg_power_w:.0f}'} | {_cell(r.ms('ttft', 'p99'))} |"
                )
            lines.append("")
            if energy_chart:
                lines += ["```", energy_chart.rstrip("\n"), "```", ""]
        if chart or chart_image:
            lines += ["## Throughput vs latency", ""]
            if chart_image:
                lines += [f"![throughput vs p99 TTFT]({chart_image})", ""]
            if chart:
                lines += ["```", chart.rstrip("\n"), "```", ""]
        lines += ["## Per layout", ""]
        for layout in exp.layouts:
            lines.append(f"### {layout.label} (preset `{layout.serve}`)")
            lines.append("")
            if layout.key in self.failed_layouts:
                lines += [f"Failed: {self.failed_layouts[layout.key]}", ""]
            curve = self.curve(layout.key)
            if not curve:
                if layout.key not in self.failed_layouts:
                    lines += ["Not measured yet.", ""]
                continue
            lines += [
                "| load | tok/s | tok/s per node | req/s | goodput % | cached % | median TTFT | p99 TTFT | median ITL | p99 ITL | p99 E2EL | failed | tokens/J | throttled % | client |",
                "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
            ]
            for r in curve:
                lines.append(
                    f"| {r.load_kind} {_g(r.load)} | {r.output_tok_s:.1f} | {r.tok_s_per_node:.1f} | {r.request_s:.2f} | {_pct(r.goodput_pct)} | {_pct(r.prefix_cache_hit_pct)} | "
                    f"{_cell(r.ms('ttft', 'median'))} | {_cell(r.ms('ttft', 'p99'))} | {_cell(r.ms('itl', 'median'))} | "
                    f"{_cell(r.ms('itl', 'p99'))} | {_cell(r.ms('e2el', 'p99'))} | {r.failed} | {_tpj(r)} | "
                    f"{_pct(r.throttled_pct)} | {'client-bound' if r.client_bound else ''} |"
                )
            lines.append("")
        return "\n".join(lines)

    def energy_chart_series(self) -> list[tuple[str, list[float], list[float]]]:
        """(layout label, tok/s per node, tokens per joule) per layout, in load order: the energy chart's data."""
        out = []
        for layout in self.experiment.layouts:
            curve = [r for r in self.curve(layout.key) if r.tokens_per_joule is not None]
            if curve:
                out.append(
                    (layout.label, [r.tok_s_per_node for r in curve], [r.tokens_per_joule or 0.0 for r in curve])
                )
        return out

    def chart_series(self) -> list[tuple[str, list[float], list[float]]]:
        """(layout label, p99 TTFT ms, tok/s per node) per layout, in load order: the chart's data."""
        out = []
        for layout in self.experiment.layouts:
            curve = [r for r in self.curve(layout.key) if r.ms(*PARETO_LATENCY) is not None]
            if curve:
                out.append(
                    (layout.label, [float(r.ms("ttft", "p99") or 0) for r in curve], [r.tok_s_per_node for r in curve])
                )
        return out


def _g(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else f"{v:g}"


def _cell(v: float | None) -> str:
    return "" if v is None else f"{v:.2f}"


def _tpj(r: ReportRow) -> str:
    return "" if r.tokens_per_joule is None else f"{r.tokens_per_joule:.3g}"


def _pct(v: float | None) -> str:
    return "" if v is None else f"{v:.1f}"


def _opt(summary: Mapping[str, object], key: str) -> float | None:
    v = summary.get(key)
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _row(point, summary: Mapping[str, object]) -> ReportRow:
    def num(key: str) -> float:
        v = summary.get(key)
        return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else 0.0

    latency = {
        k: float(v)
        for k, v in summary.items()
        if k.endswith("_ms") and isinstance(v, (int, float)) and not isinstance(v, bool)
    }
    return ReportRow(
        layout=point.layout.label,
        layout_key=point.layout.key,
        point=point.id,
        # a find-max point's load is the answer the search found, not a planned one
        load=num("find_max_load") if "find_max_load" in summary else point.load,
        load_kind=str(summary.get("find_max_dimension") or "")
        or ("concurrency" if point.concurrency is not None else "rate"),
        replicas=point.layout.replicas,
        nodes=int(num("nodes") or 1),
        completed=int(num("completed")),
        failed=int(num("failed")),
        output_tok_s=num("output_throughput"),
        total_tok_s=num("total_token_throughput"),
        request_s=num("request_throughput"),
        latency=latency,
        tokens_per_joule=_opt(summary, "tokens_per_joule"),
        avg_power_w=_opt(summary, "avg_power_w"),
        throttled_pct=_opt(summary, "throttled_pct"),
        goodput_pct=_opt(summary, "goodput_pct"),
        prefix_cache_hit_pct=_opt(summary, "prefix_cache_hit_pct"),
        prefix_cache_warning=printable(str(summary["prefix_cache_warning"]))  # from the state file
        if summary.get("prefix_cache_warning")
        else None,
        client_bound=summary.get("client_bound") if isinstance(summary.get("client_bound"), bool) else None,  # type: ignore[arg-type]
    )


def pareto_front(rows: Sequence[ReportRow]) -> list[ReportRow]:
    """Rows no other row beats on both tok/s per node (higher) and p99 TTFT (lower)."""
    metric, stat = PARETO_LATENCY
    measured = [r for r in rows if r.ms(metric, stat) is not None]
    front = []
    for r in measured:
        lat = r.ms(metric, stat)
        dominated = any(
            o is not r
            and (o.ms(metric, stat) or 0) <= (lat or 0)
            and o.tok_s_per_node >= r.tok_s_per_node
            and ((o.ms(metric, stat) or 0) < (lat or 0) or o.tok_s_per_node > r.tok_s_per_node)
            for o in measured
        )
        if not dominated:
            front.append(r)
    return sorted(front, key=lambda r: r.ms(metric, stat) or 0)


def energy_front(rows: Sequence[ReportRow]) -> list[ReportRow]:
    """Rows no other row beats on both tok/s per node and tokens per joule (higher both), by speed."""
    known = [r for r in rows if r.tokens_per_joule is not None]
    front = []
    for r in known:
        e = r.tokens_per_joule or 0.0
        dominated = any(
            o is not r
            and (o.tokens_per_joule or 0.0) >= e
            and o.tok_s_per_node >= r.tok_s_per_node
            and ((o.tokens_per_joule or 0.0) > e or o.tok_s_per_node > r.tok_s_per_node)
            for o in known
        )
        if not dominated:
            front.append(r)
    return sorted(front, key=lambda r: r.tok_s_per_node)


def meets(row: ReportRow, budget: Budget) -> bool:
    """Every limit of the budget holds (a latency not measured does not pass) and nothing failed."""
    if row.failed:
        return False
    for metric, stat, limit in budget.limits:
        v = row.ms(metric, stat)
        if v is None or v > limit:
            return False
    return True


def build_report(exp: Experiment, state: ExperimentState) -> ExperimentReport:
    points = plan_points(exp)
    # a point whose clients wrote no result is done (never rerun) but has nothing to plot
    rows = tuple(_row(p, state.done[p.id]) for p in points if "output_throughput" in state.done.get(p.id, {}))
    winners = []
    for budget in exp.budgets:
        ok = [r for r in rows if meets(r, budget)]
        with_energy = [r for r in ok if r.tokens_per_joule is not None]
        winners.append(
            BudgetWinner(
                budget,
                max(ok, key=lambda r: r.tok_s_per_node) if ok else None,
                max(with_energy, key=lambda r: r.tokens_per_joule or 0.0) if with_energy else None,
            )
        )
    return ExperimentReport(
        experiment=exp,
        rows=rows,
        pareto=tuple(pareto_front(rows)),
        winners=tuple(winners),
        failed_layouts=dict(state.failed_layouts),
        planned=len(points),
        node=state.node,
        partition_note=next(
            (e for e in reversed(state.events) if "partition restored" in e or "not restored" in e), None
        ),
    )
