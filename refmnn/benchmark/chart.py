"""PNG chart: each engine's median latency relative to onnxruntime, per model and thread count.

One panel per thread count; models along x, one bar per engine, log-scale y (1 = as fast as
onnxruntime, above = slower). An engine with no timing (failed, not installed, not
applicable) gets a labelled stub instead of a bar, so nothing is silently missing.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any


def _engines(records: Sequence[dict[str, Any]]) -> list[str]:
    order: list[str] = []
    for r in records:
        if r["engine"] not in order:
            order.append(r["engine"])
    return order


def write_chart(records: Sequence[dict[str, Any]], path: Path, title: str = "") -> Path | None:
    """Draw the chart into ``path``; returns None when matplotlib is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None

    models: list[str] = []
    for r in records:
        if r["model"] not in models:
            models.append(r["model"])
    threads = sorted({r["threads"] for r in records})
    engines = _engines(records)
    index = {(r["model"], r["engine"], r["threads"]): r for r in records}
    colors = matplotlib.colormaps["tab10"]

    width_in = max(6.0, 1.2 + len(models) * (0.25 * len(engines) + 0.5))
    fig, axes = plt.subplots(len(threads), 1, figsize=(width_in, 3.6 * len(threads)),
                             squeeze=False)
    bar = 0.8 / max(1, len(engines))
    ratios = [r["ratio_to_onnxruntime"] for r in records if r.get("ratio_to_onnxruntime")]
    low = min([1.0, *ratios]) / 2
    high = max([1.0, *ratios]) * 2
    for ax, t in zip(axes[:, 0], threads, strict=True):
        for e, engine in enumerate(engines):
            xs, ys = [], []
            for m, model in enumerate(models):
                r = index.get((model, engine, t))
                x = m - 0.4 + bar * (e + 0.5)
                ratio = r.get("ratio_to_onnxruntime") if r else None
                if ratio:
                    xs.append(x)
                    ys.append(ratio)
                    if r["status"] == "differs":
                        ax.text(x, ratio * 1.08, "!", ha="center", va="bottom", fontsize=8,
                                color="red")
                else:
                    label = (r["status"] if r else "not run")
                    if r and r["status"] in ("ok", "differs", "unchecked"):
                        label = "no ORT"
                    ax.text(x, low * 1.15, label, rotation=90, ha="center", va="bottom",
                            fontsize=6, color="gray")
            if xs:
                ax.bar(xs, ys, width=bar, color=colors(e % 10))
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.set_yscale("log")
        ax.set_ylim(low, high)
        ax.set_xticks(range(len(models)), models)
        ax.set_xlim(-0.6, len(models) - 0.4)
        ax.set_ylabel("latency / onnxruntime")
        ax.set_title(f"{t} thread{'s' if t != 1 else ''}", fontsize=10)
        ax.grid(axis="y", which="both", alpha=0.3)
    from matplotlib.patches import Patch

    handles = [Patch(color=colors(e % 10), label=engine) for e, engine in enumerate(engines)]
    fig.legend(handles=handles, fontsize=8, ncol=min(len(engines), 5), loc="lower center",
               frameon=False)
    if title:
        fig.suptitle(title, fontsize=10)
    legend_rows = -(-len(engines) // 5)
    fig.tight_layout(rect=(0, 0.3 * legend_rows / fig.get_figheight(), 1, 1))
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
