"""The report's PNGs: matplotlib's object API on the Agg canvas (as eval.report), no pyplot, no display."""
from __future__ import annotations

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


def roc(curve: dict | None, points: list[tuple[str, float, float]], title: str, path: Path) -> Path | None:
    """The plaintext ROC curve (TAR against FAR, log FAR) and each protocol's operating points ``(label, far, tar)``."""
    if not curve and not points:
        return None
    fig = Figure(figsize=(6.0, 4.6))
    ax = fig.add_subplot()
    if curve:
        far = [f for f in curve["far"] if f > 0]
        tar = [t for f, t in zip(curve["far"], curve["tar"]) if f > 0]
        ax.plot(far, tar, lw=1.5, color="black", label="plaintext (float distances)")
    markers = "osD^v<>phX*"
    for k, (label, far_, tar_) in enumerate(points):
        edge = " [FAR 0: at the left edge]" if far_ < 1e-5 else ""
        ax.plot([max(far_, 1e-5)], [tar_], markers[k % len(markers)], ms=6, label=label + edge, alpha=0.85,
                clip_on=False)
    ax.set_xscale("log")
    ax.set_xlim(1e-5, 1)
    ax.set_ylim(min([0.8] + [p[2] - 0.02 for p in points]), 1.005)
    ax.set_xlabel("FAR / FPIR")
    ax.set_ylabel("TAR / TPIR")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")
    return _save(fig, path)
