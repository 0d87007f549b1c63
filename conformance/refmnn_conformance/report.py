"""The conformance report: JSON, Markdown and one self-contained HTML page.

The matrix has one row per case (``Op@opset``) and one column per dtype, for each backend;
a cell says pass, fail, xfail, fell back, unsupported (or reference error for an ONNX test the
reference itself cannot run), how many samples, the largest relative error and the largest
distance in ULPs from the float64 oracle. Passes far from the oracle (:func:`far_passes`) are
listed apart: inside the tolerance, but where the reference is close. Everything is sorted
and nothing depends on the clock, so two runs of the same suite diff clean. The last line of
the Markdown (and of the terminal summary) is exactly ``N passed, N failed``.
"""

from __future__ import annotations

import html
import json
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

STATUS_ORDER = ("fail", "xpass", "pass", "xfail", "fell back", "unsupported", "reference error")
COLORS = {"fail": "#f4a6a6", "xpass": "#f4a6a6", "pass": "#b8e6b8", "xfail": "#f7e3a1",
          "fell back": "#d9d9f3", "unsupported": "#e6e6e6", "reference error": "#eeeeee"}


FAR_ULP = 1000.0
FAR_FACTOR = 100.0
"""A pass is far from the oracle when the backend's distance from the float64 oracle is at least
FAR_ULP ULPs and FAR_FACTOR times the reference's (or 1 ULP's): the tolerance's absolute term,
scaled to the output's magnitude, lets a value near zero be wrong in every digit (OpenCL's Elu
computed exp(x) - 1: Elu(-1e-30) came out 0, 1e7 ULPs away, and passed). Rounding noise stays
well under the factor: a GPU's LayerNormalization at 3594 ULPs against the reference's 292."""
FAR_NOTE = (f"Passed within the tolerance, but at least {FAR_ULP:g} ULPs and {FAR_FACTOR:g} times "
            "the reference's distance from the float64 oracle: a cancellation or a lost small "
            "value that the tolerance's absolute term hides. Worth a look.")


def far_passes(records: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The passes whose ULP distance is far beyond the reference's (see FAR_ULP)."""
    far = []
    for r in records:
        ulp = r.get("ulp_backend")
        if r["status"] != "pass" or ulp is None or ulp < FAR_ULP:
            continue
        if ulp >= FAR_FACTOR * max(float(r.get("ulp_reference") or 0.0), 1.0):
            far.append(r)
    return far


def _far_text(r: Mapping[str, Any]) -> str:
    """What follows a far pass's id: its ULPs, the reference's and its relative error."""
    reference = _fmt(r.get("ulp_reference"), 3) or "n/a"
    return (f"{_fmt(r['ulp_backend'], 3)} ULPs (reference {reference}), relative error "
            f"{_fmt(r.get('max_rel'))}")


def closing_line(records: Iterable[Mapping[str, Any]]) -> str:
    counts = Counter(r["status"] for r in records)
    return f"{counts['pass']} passed, {counts['fail'] + counts['xpass']} failed"


def _cell_status(statuses: Counter) -> str:
    for status in STATUS_ORDER:
        if statuses.get(status):
            return status
    return "unsupported"


def _max(values: Iterable[Any]) -> float | None:
    found = [float(v) for v in values if v is not None]
    return max(found) if found else None


def matrix(records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """{backend: {case: {dtype: cell}}}: the aggregated matrix (value/onnx checks only)."""
    cells: dict[tuple[str, str, str], list[Mapping[str, Any]]] = defaultdict(list)
    for r in records:
        if r.get("check") not in ("value", None) and r.get("source") != "onnx":
            continue
        key_case = r["case"] if r.get("source") != "onnx" else f"{r['case']} (onnx)"
        cells[(r["backend"], key_case, r["dtype"])].append(r)
    out: dict[str, Any] = {}
    for (backend, case, dtype), rs in sorted(cells.items()):
        statuses = Counter(r["status"] for r in rs)
        out.setdefault(backend, {}).setdefault(case, {})[dtype] = {
            "status": _cell_status(statuses),
            "counts": dict(sorted(statuses.items())),
            "max_rel": _max(r.get("max_rel") for r in rs),
            "max_abs": _max(r.get("max_abs") for r in rs),
            "ulp_backend": _max(r.get("ulp_backend") for r in rs),
            "ulp_reference": _max(r.get("ulp_reference") for r in rs),
        }
    return out


def summary(records: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    return dict(sorted(Counter(r["status"] for r in records).items()))


def _fmt(value: float | None, digits: int = 2) -> str:
    return "" if value is None else f"{value:.{digits}g}"


def _cell_text(cell: Mapping[str, Any]) -> str:
    counts = cell["counts"]
    total = sum(counts.values())
    text = f"{cell['status']} {counts.get(cell['status'], 0)}/{total}"
    if cell["max_rel"]:
        text += f" rel {_fmt(cell['max_rel'])}"
    if cell["ulp_backend"] is not None:
        text += f" ulp {_fmt(cell['ulp_backend'], 3)}"
        if cell["ulp_reference"] is not None:
            text += f" (ref {_fmt(cell['ulp_reference'], 3)})"
    return text


def to_markdown(records: Sequence[Mapping[str, Any]], header: Mapping[str, str]) -> str:
    lines = ["# refmnn conformance report", ""]
    for key, value in header.items():
        lines.append(f"- **{key}**: {value}")
    lines += ["", "## Summary", ""]
    for status, count in summary(records).items():
        lines.append(f"- {status}: {count}")
    for backend, cases in matrix(records).items():
        dtypes = sorted({d for row in cases.values() for d in row})
        lines += ["", f"## Matrix: {backend}", "",
                  "Each cell: status, samples with that status / samples, largest relative error, "
                  "largest distance from the float64 oracle in ULPs (the float32 reference's in "
                  "parentheses).", "",
                  "| case | " + " | ".join(dtypes) + " |", "|---" * (len(dtypes) + 1) + "|"]
        for case, row in cases.items():
            lines.append(f"| {case} | " + " | ".join(_cell_text(row[d]) if d in row else "" for d in dtypes) + " |")
    failures = [r for r in records if r["status"] in ("fail", "xpass")]
    far = far_passes(records)
    if far:
        lines += ["", "## Passes far from the oracle", "", FAR_NOTE, ""]
        lines += [f"- `{r['id']}`: {_far_text(r)}" for r in far]
    if failures:
        lines += ["", "## Failures", ""]
        for r in failures:
            lines.append(f"- `{r['id']}` ({r.get('check', 'value')}): {r.get('message', r['status'])}")
    not_judged = [r for r in records if r["status"] in ("fell back", "unsupported", "reference error")]
    if not_judged:
        lines += ["", "## Not judged", ""]
        for r in not_judged:
            lines.append(f"- `{r['id']}`: {r['status']}" + (f" ({r['reason']})" if r.get("reason") else ""))
    lines += ["", closing_line(records)]
    return "\n".join(lines) + "\n"


def to_html(records: Sequence[Mapping[str, Any]], header: Mapping[str, str]) -> str:
    esc = html.escape
    parts = ["<!DOCTYPE html>", "<html><head><meta charset='utf-8'>",
             "<title>refmnn conformance report</title>",
             "<style>body{font-family:sans-serif;margin:1.5em}table{border-collapse:collapse;"
             "font-size:13px}td,th{border:1px solid #bbb;padding:3px 6px;text-align:left}"
             "th{background:#eee;position:sticky;top:0}"
             + "".join(f".s{i}{{background:{COLORS[s]}}}" for i, s in enumerate(STATUS_ORDER))
             + "</style></head><body>", "<h1>refmnn conformance report</h1><ul>"]
    for key, value in header.items():
        parts.append(f"<li><b>{esc(key)}</b>: {esc(str(value))}</li>")
    parts.append("</ul><h2>Summary</h2><ul>")
    for status, count in summary(records).items():
        parts.append(f"<li>{esc(status)}: {count}</li>")
    parts.append("</ul>")
    for backend, cases in matrix(records).items():
        dtypes = sorted({d for row in cases.values() for d in row})
        parts.append(f"<h2>Matrix: {esc(backend)}</h2><table><tr><th>case</th>"
                     + "".join(f"<th>{esc(d)}</th>" for d in dtypes) + "</tr>")
        for case, row in cases.items():
            parts.append(f"<tr><th>{esc(case)}</th>")
            for d in dtypes:
                if d not in row:
                    parts.append("<td></td>")
                    continue
                cell = row[d]
                klass = f"s{STATUS_ORDER.index(cell['status'])}"
                parts.append(f"<td class='{klass}'>{esc(_cell_text(cell))}</td>")
            parts.append("</tr>")
        parts.append("</table>")
    far = far_passes(records)
    if far:
        parts.append(f"<h2>Passes far from the oracle</h2><p>{esc(FAR_NOTE)}</p><ul>")
        parts += [f"<li><code>{esc(r['id'])}</code>: {esc(_far_text(r))}</li>" for r in far]
        parts.append("</ul>")
    failures = [r for r in records if r["status"] in ("fail", "xpass")]
    if failures:
        parts.append("<h2>Failures</h2><ul>")
        for r in failures:
            parts.append(f"<li><code>{esc(r['id'])}</code>: {esc(r.get('message', r['status']))}</li>")
        parts.append("</ul>")
    parts.append(f"<p id='closing'>{esc(closing_line(records))}</p></body></html>")
    return "\n".join(parts) + "\n"


def write(directory: str | Path, records: Sequence[Mapping[str, Any]],
          header: Mapping[str, str]) -> list[Path]:
    """Write report.json, report.md and report.html into ``directory``; returns the paths."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    records = sorted(({k: v for k, v in r.items() if k != "nodeid"} for r in records),
                     key=lambda r: (r.get("source", ""), r.get("check", ""), r["id"]))
    data = {"header": dict(header), "summary": summary(records), "closing": closing_line(records),
            "matrix": matrix(records), "far_from_oracle": [r["id"] for r in far_passes(records)],
            "results": list(records)}
    paths = [directory / "report.json", directory / "report.md", directory / "report.html"]
    paths[0].write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    paths[1].write_text(to_markdown(records, header))
    paths[2].write_text(to_html(records, header))
    return paths
