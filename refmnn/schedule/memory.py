"""Memory planning: liveness-based offsets into one arena per (backend, storage kind).

Every planned value has a live interval ``[first, last]`` in step indices: from the step that
defines it to the last step that reads it (graph inputs are defined at step -1, graph outputs
live to the end, a kernel's workspace lives during its own step). Offsets are assigned greedily,
each at the lowest aligned offset that overlaps no already-placed value whose interval
intersects its own, in two orders -- by size, largest first (the "greedy by size" strategy of
TFLite's arena planner, equivalent in effect to MNN's deferred allocator), and by size times
live range -- keeping the plan with the lower peak. The plan records three figures per arena:

* ``peak``: the arena size the plan needs;
* ``total``: the sum of all planned sizes (what no reuse at all would need);
* ``lower_bound``: the largest total of sizes live at any one step (no plan can do better).
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

ALIGNMENT = 64


def align(nbytes: int, alignment: int = ALIGNMENT) -> int:
    """Round up to a multiple of ``alignment`` (at least one alignment unit)."""
    return max(alignment, -(-nbytes // alignment) * alignment)


def format_bytes(n: int) -> str:
    """``n`` bytes for a person: ``512 B``, ``1.50 KiB``, ... up to TiB."""
    if abs(n) < 1024:
        return f"{n:.0f} B"
    size = float(n)
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        size /= 1024
        if abs(size) < 1024 or unit == "TiB":
            break
    return f"{size:.2f} {unit}"


@dataclass(frozen=True, slots=True)
class Interval:
    """One value to place: a key, its size in bytes and its live range (inclusive)."""

    key: str
    nbytes: int
    first: int
    last: int

    def overlaps(self, other: Interval) -> bool:
        return self.first <= other.last and other.first <= self.last


@dataclass(frozen=True, slots=True)
class ArenaPlan:
    """Offsets of the values of one arena and its figures."""

    offsets: Mapping[str, int]
    sizes: Mapping[str, int]  # aligned sizes
    peak: int
    total: int
    lower_bound: int


def lower_bound(intervals: Sequence[Interval]) -> int:
    """The largest total of (aligned) sizes live at the same step."""
    events: dict[int, int] = {}
    for iv in intervals:
        size = align(iv.nbytes)
        events[iv.first] = events.get(iv.first, 0) + size
        events[iv.last + 1] = events.get(iv.last + 1, 0) - size
    best = running = 0
    for step in sorted(events):
        running += events[step]
        best = max(best, running)
    return best


def plan_arena(intervals: Sequence[Interval], *, reuse: bool = True) -> ArenaPlan:
    """Assign an offset to every interval: greedy placement in two orders, the plan with the
    lower peak (the first on a tie).

    * by size, largest first (ties by first use, then key): TFLite's "greedy by size";
    * by area, size times live range, largest first (ties by first use, then key): the values
      that constrain most steps are placed first. In-place aliasing merges an elementwise chain
      into one long-lived value; by size, ViT-Tiny's reference then needed 10.2 % more than the
      lower bound, by area none (the other zoo models reach it either way).

    With ``reuse=False`` every value gets its own bytes (the plan of an engine without memory
    planning), which is what the ``total`` figure measures.
    """
    def by_size(iv: Interval) -> tuple:
        return (-align(iv.nbytes), iv.first, iv.key)

    def by_area(iv: Interval) -> tuple:
        return (-align(iv.nbytes) * (iv.last - iv.first + 1), iv.first, iv.key)

    offsets, peak = min((_place(sorted(intervals, key=key), reuse) for key in (by_size, by_area)),
                        key=lambda placed: placed[1])
    return ArenaPlan(offsets=offsets, sizes={iv.key: align(iv.nbytes) for iv in intervals},
                     peak=peak, total=sum(align(iv.nbytes) for iv in intervals),
                     lower_bound=lower_bound(intervals))


def _place(order: Sequence[Interval], reuse: bool) -> tuple[dict[str, int], int]:
    """({key: offset}, peak): each interval in turn at the lowest aligned offset that overlaps
    no already-placed one it is live with (any placed one when ``reuse`` is False: then they
    simply follow one another).

    The placed values live at each step are kept by step, so finding those an interval is live
    with costs its length times the graph's width, not the number placed so far: a chain of
    6,000 elementwise nodes planned in 11.1 s before (every placed value tested against every
    new one, in both orders), now in milliseconds; the offsets are the same."""
    offsets: dict[str, int] = {}
    if not reuse:
        end = 0
        for iv in order:
            offsets[iv.key] = end
            end += align(iv.nbytes)
        return offsets, end
    spans: list[tuple[int, int]] = []  # (offset, end) of each placed value, in placing order
    live: dict[int, list[int]] = {}  # step -> indices into spans of the values live then
    for iv in order:
        size = align(iv.nbytes)
        steps = range(iv.first, iv.last + 1)
        near = {index for step in steps for index in live.get(step, ())}
        offset = 0
        for start, end in sorted(spans[index] for index in near):
            if offset + size <= start:
                break
            offset = max(offset, end)
        offsets[iv.key] = offset
        for step in steps:
            live.setdefault(step, []).append(len(spans))
        spans.append((offset, offset + size))
    return offsets, max((end for _, end in spans), default=0)


def verify_no_overlap(intervals: Sequence[Interval], plan: ArenaPlan) -> None:
    """Raise AssertionError naming two values that are live together and share bytes.

    A sweep over the steps: the values live at the current step, kept sorted by offset, must
    be disjoint, so a value that starts being live needs checking against its two neighbours
    there only (n log n; testing every pair took 3.2 s on a chain of 6,000 nodes)."""
    active: list[tuple[int, int, str]] = []  # (offset, end, key) of the live values, by offset
    retire: list[tuple[int, int, str]] = []  # heap of (last step, offset, key)
    by_key = {iv.key: iv for iv in intervals}
    for iv in sorted(intervals, key=lambda iv: (iv.first, iv.key)):
        while retire and retire[0][0] < iv.first:
            _, offset, key = heapq.heappop(retire)
            del active[bisect.bisect_left(active, (offset, -1, key))]
        start = plan.offsets[iv.key]
        item = (start, start + plan.sizes[iv.key], iv.key)
        at = bisect.bisect_left(active, item)
        for other in active[max(at - 1, 0):at + 1]:
            if other[0] < item[1] and item[0] < other[1]:
                a, b = by_key[other[2]], iv
                raise AssertionError(f"memory plan overlap: {a.key!r} [{other[0]}, {other[1]}) "
                                     f"live {a.first}..{a.last} and {b.key!r} at {start} live "
                                     f"{b.first}..{b.last}")
        active.insert(at, item)
        heapq.heappush(retire, (iv.last, start, iv.key))
