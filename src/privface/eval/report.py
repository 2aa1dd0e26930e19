"""Plots and a Markdown summary for one verification experiment.

Figures are drawn with matplotlib's object API on the Agg canvas (no pyplot, no display, no
global backend switch), so this is safe in headless runs and threads.
"""
from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from statistics import NormalDist
from typing import Any

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from .metrics import _validate, eer, roc

__all__ = ["write_report"]

# probit spacing is tight in the tail, so decades only below 1%
_DET_TICKS = np.array([1e-6, 1e-5, 1e-4, 1e-3, 0.01, 0.02, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 0.9, 0.95])
_probit = np.vectorize(NormalDist().inv_cdf, otypes=[float])


def _pct(p: float) -> str:
    return f"{100 * p:g}%"


def _save(fig: Figure, path: Path) -> Path:
    FigureCanvasAgg(fig)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    return path


def _roc_plot(far: np.ndarray, tar: np.ndarray, e: float, title: str, path: Path) -> Path:
    fig = Figure(figsize=(5.5, 4.5))
    ax = fig.add_subplot()
    keep = far > 0  # FAR = 0 has no place on a log axis
    ax.plot(far[keep], tar[keep], lw=1.5)
    if e > 0:
        ax.plot([e], [1 - e], "o", ms=5, label=f"EER = {100 * e:.2f}%")
        ax.legend(loc="lower right")
    ax.set_xscale("log")
    ax.set_xlim(far[keep].min() if keep.any() else 1e-4, 1)
    ax.set_ylim(0, 1.01)
    ax.set_xlabel("FAR (false accept rate)")
    ax.set_ylabel("TAR (true accept rate)")
    ax.set_title(f"ROC — {title}")
    ax.grid(True, which="both", alpha=0.3)
    return _save(fig, path)


def _det_plot(far: np.ndarray, frr: np.ndarray, e: float, n_imp: int, n_gen: int,
              title: str, path: Path) -> Path:
    """DET: FRR vs FAR, both axes on the normal-deviate (probit) scale, labelled in %."""
    hi = 0.95
    # lowest shown rate: the largest tick at or below half the smallest non-zero rate
    # (never above 1%, so tiny sets still get a readable low-error region)
    lo_x = _DET_TICKS[_DET_TICKS <= min(0.01, 0.5 / n_imp)].max()
    lo_y = _DET_TICKS[_DET_TICKS <= min(0.01, 0.5 / n_gen)].max()
    x = _probit(np.clip(far, lo_x, hi))  # zero rates are drawn on the axis edge
    y = _probit(np.clip(frr, lo_y, hi))
    fig = Figure(figsize=(5.5, 5))
    ax = fig.add_subplot()
    ax.plot(x, y, lw=1.5)
    lo = max(lo_x, lo_y)
    ax.plot(_probit([lo, hi]), _probit([lo, hi]), ls=":", c="grey", lw=1, label="FAR = FRR")
    if lo_x <= e <= hi and lo_y <= e:
        ax.plot(_probit([e]), _probit([e]), "o", ms=5, label=f"EER = {100 * e:.2f}%")
    ax.legend(loc="upper right")
    for axis, lo_a, set_lim in ((ax.xaxis, lo_x, ax.set_xlim), (ax.yaxis, lo_y, ax.set_ylim)):
        ticks = _DET_TICKS[(_DET_TICKS >= lo_a) & (_DET_TICKS <= hi)]
        axis.set_ticks(_probit(ticks), [_pct(t) for t in ticks])
        set_lim(_probit(lo_a), _probit(hi))
    ax.tick_params(axis="x", labelrotation=45)
    ax.set_xlabel("FAR (false accept rate)")
    ax.set_ylabel("FRR (false reject rate)")
    ax.set_title(f"DET — {title}")
    ax.grid(True, alpha=0.3)
    return _save(fig, path)


def _hist_plot(d: np.ndarray, g: np.ndarray, threshold: float, title: str, path: Path) -> Path:
    fig = Figure(figsize=(6, 4))
    ax = fig.add_subplot()
    bins = np.histogram_bin_edges(d, bins=min(100, max(10, int(np.sqrt(d.size)))))
    ax.hist(d[g], bins=bins, density=True, alpha=0.6, label=f"genuine (n={int(g.sum())})")
    ax.hist(d[~g], bins=bins, density=True, alpha=0.6, label=f"impostor (n={int((~g).sum())})")
    ax.axvline(threshold, c="k", ls="--", lw=1, label=f"EER threshold = {threshold:.4g}")
    ax.set_xlabel("distance")
    ax.set_ylabel("density")
    ax.set_title(f"Distance distributions — {title}")
    ax.legend()
    return _save(fig, path)


def _fmt(v: Any) -> str:
    if isinstance(v, (bool, np.bool_)):
        return str(bool(v))
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    if isinstance(v, (float, np.floating)):
        return f"{float(v):.6g}"
    return str(v).replace("|", "\\|").replace("\n", " ")


def _rows(summary: Mapping[str, Any], prefix: str = "") -> list[tuple[str, str]]:
    """Flatten nested dicts as "outer[inner]" rows."""
    rows: list[tuple[str, str]] = []
    for k, v in summary.items():
        key = f"{prefix}[{k}]" if prefix else str(k)
        if isinstance(v, Mapping):
            rows.extend(_rows(v, key))
        else:
            rows.append((key.replace("|", "\\|"), _fmt(v)))
    return rows


def write_report(out_dir: str | Path, distances: np.ndarray, genuine: np.ndarray,
                 title: str, summary: Mapping[str, Any]) -> list[Path]:
    """Write roc.png, det.png, hist.png and summary.md into out_dir (created if needed).

    roc.png: TAR vs FAR with a log FAR axis. det.png: FRR vs FAR on normal-deviate (probit)
    axes, ticks labelled in %, rates of 0 drawn on the axis edge. hist.png: genuine and impostor
    distance histograms with the EER threshold as a vertical line. summary.md: the title, a
    Markdown table of ``summary`` (nested dicts flattened as ``key[subkey]``) and the three
    images. Returns the written paths in that order. Logs nothing.
    """
    d, g = _validate(distances, genuine)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    far, tar, _ = roc(d, g)
    e, t = eer(d, g)
    n_gen = int(g.sum())
    paths = [
        _roc_plot(far, tar, e, title, out / "roc.png"),
        _det_plot(far, 1 - tar, e, d.size - n_gen, n_gen, title, out / "det.png"),
        _hist_plot(d, g, t, title, out / "hist.png"),
    ]
    lines = [f"# {title}", "", "| Metric | Value |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in _rows(summary)]
    lines += ["", "![ROC curve](roc.png)", "", "![DET curve](det.png)", "",
              "![Distance histograms](hist.png)", ""]
    md = out / "summary.md"
    md.write_text("\n".join(lines), encoding="utf-8")
    return [*paths, md]
