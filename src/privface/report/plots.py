"""The report's PNGs: matplotlib's object API on the Agg canvas (as eval.report), no pyplot, no display."""
from __future__ import annotations

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
    Right, for each 1:1 protocol, its EER beside the plaintext EER on the same sampled pairs — a point per protocol,
    however few pairs it ran, with the pair count and the decisions that differ from plaintext in its label.
    ``curve``: {far, tar}; ``pairs``: (label, plaintext EER, protocol EER, pairs, differing); ``ident``: (label,
    FPIR, TPIR)."""
    if not curve and not pairs and not ident:
        return None
    fig = Figure(figsize=(11.0, 0.32 * max(len(pairs), 8) + 2.2), layout="constrained")
    ax_d, ax_e = fig.subplots(1, 2, gridspec_kw={"width_ratios": [1, 1.15]})
    floor = 1e-4
    if curve:
        pts = [(f, 1 - t) for f, t in zip(curve["far"], curve["tar"]) if f > 0 and 1 - t > 0]
        if pts:
            ax_d.plot([p[0] for p in pts], [p[1] for p in pts], lw=1.6, color="black",
                      label="plaintext (float distances, all pairs)")
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
            ax.legend(fontsize=8, loc="lower left")  # the ideal corner: no curve there
    if pairs:
        ys = list(range(len(pairs)))[::-1]
        ax_e.scatter([100 * p[1] for p in pairs], ys, s=60, facecolors="none", edgecolors="black",
                     label="plaintext, same pairs", zorder=3)
        ax_e.scatter([100 * p[2] for p in pairs], ys, s=22, color="#d62728", label="protocol", zorder=4)
        ax_e.set_yticks(ys, [f"{p[0]}\n{p[3]:,} pairs" + (f", {p[4]} differ" if p[4] is not None else "")
                             for p in pairs], fontsize=8)
        ax_e.set_ylim(-0.7, len(pairs) - 0.3)
        ax_e.set_xlabel("EER on the protocol's sampled pairs (%)")
        ax_e.set_title("1:1 protocols: EER against plaintext on the same pairs\n(lower is better)", fontsize=10)
        ax_e.grid(True, axis="x", alpha=0.3)
        ax_e.legend(fontsize=8, loc="lower right")
        ax_e.set_xlim(0, 100 * max(max(p[1], p[2]) for p in pairs) * 1.15 or 1)
    else:
        ax_e.set_axis_off()
        ax_e.text(0.5, 0.5, "no 1:1 protocol evaluated", ha="center", va="center")
    fig.suptitle(title, fontsize=12)
    return _save(fig, path)
