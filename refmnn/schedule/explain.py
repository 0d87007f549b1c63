"""Human-readable views of a Plan: the step table, the memory summary and the memory picture."""

from __future__ import annotations

from typing import TYPE_CHECKING

from refmnn.schedule.memory import format_bytes

if TYPE_CHECKING:
    from refmnn.schedule.plan import Plan


def memory_summary(plan: Plan) -> list[str]:
    """Per backend arena: planned peak, sum of all activation sizes, and the lower bound."""
    lines = ["memory:"]
    for backend, arena in sorted(plan.arenas.items()):
        ratio = arena.peak / arena.lower_bound if arena.lower_bound else 1.0
        lines.append(f"  {backend}: arena peak {format_bytes(arena.peak)} ({arena.peak} B), "
                     f"sum of activations {format_bytes(arena.total)} ({arena.total} B), "
                     f"lower bound {format_bytes(arena.lower_bound)} ({arena.lower_bound} B), "
                     f"peak/lower bound {ratio:.3f}")
    dynamic = [s.key for s in plan.slots.values() if s.storage is None]
    if dynamic:
        lines.append(f"  host objects outside any arena: {len(dynamic)} "
                     f"({', '.join(sorted(dynamic)[:6])}{', ...' if len(dynamic) > 6 else ''})")
    if plan.folded:
        lines.append(f"  folded at plan time: {len(plan.folded)} value(s)")
    return lines


def format_table(plan: Plan) -> str:
    """node | op@opset | backend | scheme (why) | outputs at offset:bytes, then memory."""
    from refmnn.schedule.plan import RunStep

    header = ("#", "node", "op@opset", "backend", "scheme", "outputs (offset:bytes)", "why")
    rows = []
    for index, step in enumerate(plan.steps):
        if isinstance(step, RunStep):
            outs = []
            for key in step.outputs:
                slot = plan.slots.get(key)
                if not key:
                    continue
                if slot is None or slot.storage is None:
                    outs.append(f"{key}=host")
                else:
                    outs.append(f"{key}@{slot.offset}:{slot.nbytes}")
            op = step.node.op if not step.node.domain else f"{step.node.domain}::{step.node.op}"
            rows.append((str(index), step.node.name, f"{op}@{step.opset}", step.backend, step.scheme,
                         " ".join(outs), step.reason))
        else:
            slot = plan.slots.get(step.dst)
            where = f"{step.dst}@{slot.offset}:{slot.nbytes}" if slot and slot.storage else step.dst
            rows.append((str(index), f"copy {step.value}", "-", f"{step.src_backend}->{step.dst_backend}",
                         "copy", where, "value crosses backends"))
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]
    widths = [min(w, 48) for w in widths]

    def line(cells: tuple[str, ...]) -> str:
        return "  ".join(c[:w].ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()

    out = [line(header), line(tuple("-" * w for w in widths))]
    out += [line(r) for r in rows]
    placed: dict[str, int] = {}
    for step in plan.steps:
        if isinstance(step, RunStep):
            placed[step.backend] = placed.get(step.backend, 0) + 1
    copies = sum(1 for s in plan.steps if not isinstance(s, RunStep))
    out.append("")
    out.append("placement: " + ", ".join(f"{b} {n} node(s)" for b, n in sorted(placed.items()))
               + f"; {copies} copy step(s)")
    out += memory_summary(plan)
    return "\n".join(out)


def plot_memory(plan: Plan, path: str) -> None:
    """Save a picture of each arena: one rectangle per value, offset against step."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    arenas = sorted(plan.arenas)
    fig, axes = plt.subplots(len(arenas), 1, figsize=(12, 4 * max(1, len(arenas))), squeeze=False)
    for ax, backend in zip(axes[:, 0], arenas, strict=True):
        arena = plan.arenas[backend]
        for slot in plan.slots.values():
            if slot.backend != backend or slot.storage is None or slot.key not in arena.offsets:
                continue
            width = max(slot.last - slot.first + 1, 1)
            ax.add_patch(Rectangle((slot.first, slot.offset / 2**20), width,
                                   max(arena.sizes[slot.key] / 2**20, 1e-6), alpha=0.6,
                                   edgecolor="black", linewidth=0.3))
        ax.axhline(arena.lower_bound / 2**20, color="red", linestyle="--", linewidth=1,
                   label=f"lower bound {arena.lower_bound / 2**20:.2f} MiB")
        ax.set_xlim(-1.5, len(plan.steps) + 1)
        ax.set_ylim(0, max(arena.peak, 1) / 2**20 * 1.05)
        ax.set_xlabel("step")
        ax.set_ylabel("offset (MiB)")
        ax.set_title(f"{backend} arena: peak {arena.peak / 2**20:.2f} MiB, "
                     f"sum of activations {arena.total / 2**20:.2f} MiB")
        ax.legend(loc="upper right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
