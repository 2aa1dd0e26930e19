"""The report's PNGs: matplotlib's object API on the Agg canvas (as eval.report), no pyplot, no display."""
from __future__ import annotations

import math
import struct
from pathlib import Path

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

IDENTIFY_COLORS = {"plain": "#444444", "hers": "#1f77b4", "idface-ckks": "#2ca02c", "idface-paillier": "#d62728",
                   "cryptomask": "#9467bd"}
IDENTIFY_LABELS = {"plain": "plaintext", "hers": "HERS (CKKS)", "idface-ckks": "IDFace CKKS",
                   "idface-paillier": "IDFace Paillier", "cryptomask": "CryptoMask (BFV)"}


def _save(fig: Figure, path: Path) -> Path:
    FigureCanvasAgg(fig)
    fig.savefig(path, dpi=100, bbox_inches="tight")
    return path


def upper_bound(k: int, n: int, alpha: float = 0.05) -> float:
    """One-sided Clopper–Pearson upper bound on a rate seen ``k`` times in ``n`` trials: the p with
    P(X ≤ k | n, p) = alpha (0 of n: 1 − alpha^(1/n), ≈ 3/n)."""
    if k >= n:
        return 1.0

    def cdf(p: float) -> float:
        if p <= 0:
            return 1.0
        if p >= 1:
            return 0.0
        return sum(math.exp(math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * math.log(p)
                            + (n - i) * math.log1p(-p)) for i in range(k + 1))

    lo, hi = k / n, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if cdf(mid) > alpha else (lo, mid)
    return hi


def png_size(path: Path) -> tuple[int, int]:
    """(width, height) in pixels, from the PNG's IHDR chunk."""
    with open(path, "rb") as f:
        head = f.read(24)
    width, height = struct.unpack(">II", head[16:24])
    return width, height


def identify_scaling(series: dict[str, list[tuple[int, float, float]]], path: Path) -> Path | None:
    """Two panels, log–log against gallery size N: identification time (s) and bytes per identification.
    ``series``: scheme → [(N, seconds, bytes)]."""
    if not any(series.values()):
        return None
    fig = Figure(figsize=(9.5, 4.0))
    ax_t, ax_b = fig.subplots(1, 2)
    for scheme, points in series.items():
        points = sorted(points)
        if not points:
            continue
        ns = [p[0] for p in points]
        style = {"color": IDENTIFY_COLORS.get(scheme), "label": IDENTIFY_LABELS.get(scheme, scheme)}
        ax_t.plot(ns, [p[1] for p in points], "o-", ms=4, **style)
        if scheme != "plain":
            ax_b.plot(ns, [max(p[2], 1) for p in points], "o-", ms=4, **style)
    for ax, ylabel, title in ((ax_t, "seconds per identification", "Identification time"),
                              (ax_b, "bytes per identification", "Identification traffic")):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("gallery size N")
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    return _save(fig, path)


def cryptomask_vs_hers(rows: list[dict], path: Path) -> Path | None:
    """Seed 001 Fig. 2 and Fig. 3 side by side, log–log against N: seconds and bytes per identification of
    CryptoMask-W, CryptoMask-WO and HERS (``build.cryptomask_versus`` rows)."""
    if not rows:
        return None
    fig = Figure(figsize=(9.5, 4.0))
    ax_t, ax_b = fig.subplots(1, 2)
    lines = (("w", "CryptoMask-W (1 bit)", "#9467bd", "o-"), ("wo", "CryptoMask-WO (distances)", "#9467bd", "s--"),
             ("hers", "HERS (CKKS)", IDENTIFY_COLORS["hers"], "o-"))
    for key, label, color, style in lines:
        for ax, field in ((ax_t, f"{key}_s"), (ax_b, f"{key}_bytes")):
            pts = [(r["n"], r[field]) for r in rows if r.get(field)]
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], style, ms=4, color=color, label=label)
    for ax, ylabel, title in ((ax_t, "seconds per identification", "Time (seed 001 Fig. 2)"),
                              (ax_b, "bytes per identification", "Communication (seed 001 Fig. 3)")):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("gallery size N")
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    return _save(fig, path)


def bytes_per_protocol(bars: list[tuple[str, float, float | None]], path: Path) -> Path | None:
    """Horizontal bars, log scale: bytes of one 1:1 verification per protocol; ``bars``: (label, bytes with the
    first/reusable message, bytes without it or None)."""
    bars = [b for b in bars if b[1]]
    if not bars:
        return None
    fig = Figure(figsize=(7.5, 0.45 * len(bars) + 1.2))
    ax = fig.add_subplot()
    ys = list(range(len(bars)))[::-1]
    ax.barh(ys, [b[1] for b in bars], color="#4c72b0", label="one verification, all messages")
    again = [(y, b[2]) for y, b in zip(ys, bars) if b[2]]
    if again:
        ax.barh([y for y, _ in again], [v for _, v in again], height=0.4, color="#dd8452",
                label="per verification, reusable first message already sent")
    ax.set_yticks(ys, [b[0] for b in bars], fontsize=9)
    ax.set_xscale("log")
    ax.set_xlabel("bytes")
    ax.set_title("Bytes per 1:1 verification")
    ax.grid(True, axis="x", which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    return _save(fig, path)


def accuracy(curve: dict | None, pairs: list[tuple[str, float, float, int, int | None]],
             ident: list[tuple[str, float, float]], title: str, path: Path) -> Path | None:
    """Two panels. Left, a DET plot (log–log: false non-match against false match rate) of the plaintext float
    distances over all the dataset's pairs, with each 1:N protocol's operating point (FNIR = 1 − TPIR at its FPIR).
    Right, for each 1:1 protocol, the share of its decisions that differ from the plaintext decisions on the same
    pairs, with its one-sided 95 % upper bound (Clopper–Pearson): how many pairs ran shows as how long the bar is.
    ``curve``: {far, tar}; ``pairs``: (label, plaintext EER, protocol EER, pairs, differing); ``ident``: (label,
    FPIR, TPIR)."""
    if not curve and not pairs and not ident:
        return None
    fig = Figure(figsize=(11.0, 0.32 * max(len(pairs), 8) + 2.2), layout="constrained")
    ax_d, ax_e = fig.subplots(1, 2, gridspec_kw={"width_ratios": [1, 1.15]})
    floor = 1e-4
    if curve:  # a rate of 0 (a small sample: FNMR 0 beyond some FMR) is drawn on the axis
        pts = [(max(f, floor), max(1 - t, floor)) for f, t in zip(curve["far"], curve["tar"]) if f > 0]
        if pts:
            zero = " [FNMR 0: bottom edge]" if any(p[1] <= floor for p in pts) else ""
            ax_d.plot([p[0] for p in pts], [p[1] for p in pts], lw=1.6, color="black", clip_on=False,
                      drawstyle="steps-post", label="plaintext (float distances, all pairs)" + zero)
    markers = "osD^v<>phX*"
    for k, (label, fpir, tpir) in enumerate(ident):
        edge = " [FPIR 0: left edge]" if fpir < floor else ""
        edge += " [FNIR 0: bottom edge]" if 1 - tpir < floor else ""
        ax_d.plot([max(fpir, floor)], [max(1 - tpir, floor)], markers[k % len(markers)], ms=7, alpha=0.9,
                  clip_on=False, label=label + edge)
    for ax in (ax_d,):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(floor, 1)
        ax.set_ylim(floor, 1)
        ax.set_xlabel("false match rate (FMR / FPIR)")
        ax.set_ylabel("false non-match rate (FNMR / FNIR)")
        ax.set_title("DET: plaintext curve, 1:N operating points\n(lower left is better)", fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.14), frameon=False)
    pairs = [p for p in pairs if p[4] is not None and p[3]]
    if pairs:
        ys = list(range(len(pairs)))[::-1]
        rate = [100 * p[4] / p[3] for p in pairs]
        upper = [100 * upper_bound(p[4], p[3]) for p in pairs]
        ax_e.hlines(ys, rate, upper, color="#4c72b0", lw=5, alpha=0.45, label="95 % upper bound (fewer pairs: longer)")
        ax_e.plot(rate, ys, "o", color="#d62728", ms=6, label="decisions that differ, measured")
        for y, u, p in zip(ys, upper, pairs):
            ax_e.annotate(f"{p[4]} of {p[3]:,}", (u, y), xytext=(4, 0), textcoords="offset points", va="center",
                          fontsize=8)
        ax_e.set_yticks(ys, [p[0] for p in pairs], fontsize=9)
        ax_e.set_ylim(-0.7, len(pairs) - 0.3)
        ax_e.set_xlim(0, max(upper) * 1.25)
        ax_e.set_xlabel("decisions that differ from plaintext on the protocol's pairs (%)")
        ax_e.set_title("1:1 protocols against plaintext, same pairs\n(lower is better)", fontsize=10)
        ax_e.grid(True, axis="x", alpha=0.3)
        ax_e.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2, frameon=False)
    else:
        ax_e.set_axis_off()
        ax_e.text(0.5, 0.5, "no 1:1 protocol evaluated", ha="center", va="center")
    fig.suptitle(title, fontsize=12)
    return _save(fig, path)
