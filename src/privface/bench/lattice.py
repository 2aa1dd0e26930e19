"""`privface bench lattice`: seed 002 Tab. 2–3 for the lattice crypto layer (CKKS, BFV, NTRU at 128-bit).

One row per (scheme, dim): ``{scheme, dim, security_bits, keygen_ms, encrypt_ms, compare_ms, key_bytes,
template_bytes}`` (medians over ``repeat`` runs). Templates are synthetic unit-norm vectors: CKKS takes the
floats, BFV their ×128 quantisation (``templates.quantize``), NTRU their LSSC binarisation with the edges of
equal-frequency quartiles of the synthetic values (3 bits per feature, seed 002 §2.1: 1536 bits at dim 512).
``compare_ms`` = distance on the encrypted reference and encrypted probe + decryption + threshold decision,
as seed 002 Tab. 2. ``key_bytes`` = serialized public context (public key) + secret key; ``template_bytes`` =
one serialized encrypted reference.
"""
from __future__ import annotations

import statistics
import time

import numpy as np

from ..crypto.lattice import BFV_128, CKKS_128, generate_lattice_keypair
from ..crypto.ntru import NTRU_1024, generate_ntru_keypair
from ..templates import quantize
from ..templates.lssc import equal_frequency_edges, lssc_binarize

DIMS = (512, 128)
SCHEMES = ("ckks", "bfv", "ntru")


def _median_ms(fn, repeat: int):
    times, out = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        times.append((time.perf_counter() - t) * 1000)
    return float(f"{statistics.median(times):.4g}"), out


def _pair(dim: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    a = rng.normal(size=dim)
    b = a + 0.5 * rng.normal(size=dim)
    return a / np.linalg.norm(a), b / np.linalg.norm(b)


def _row(scheme: str, dim: int, security_bits: int, keygen_ms: float, encrypt_ms: float, compare_ms: float,
         key_bytes: int, template_bytes: int) -> dict:
    return {"scheme": scheme, "dim": dim, "security_bits": security_bits, "keygen_ms": keygen_ms,
            "encrypt_ms": encrypt_ms, "compare_ms": compare_ms, "key_bytes": key_bytes,
            "template_bytes": template_bytes}


def _seal_row(params, dim: int, a, b, threshold, repeat: int) -> dict:
    keygen_ms, (pub, sec) = _median_ms(lambda: generate_lattice_keypair(params), max(3, repeat // 3))
    encrypt_ms, ref = _median_ms(lambda: pub.encrypt_template(a), repeat)
    probe = pub.encrypt_probe(b)
    compare_ms, _ = _median_ms(lambda: sec.decrypt_distance(pub.squared_distance(ref, probe)) <= threshold, repeat)
    return _row(params.scheme, dim, params.security_bits, keygen_ms, encrypt_ms, compare_ms,
                len(pub.to_bytes()) + len(sec.secret_to_bytes()), len(ref.to_bytes()))


def _ntru_row(dim: int, a, b, repeat: int) -> dict:
    edges = equal_frequency_edges(np.concatenate([a, b]))
    x, y = lssc_binarize(a, edges=edges), lssc_binarize(b, edges=edges)
    keygen_ms, (pk, sk) = _median_ms(lambda: generate_ntru_keypair(NTRU_1024), max(3, repeat // 3))
    encrypt_ms, ref = _median_ms(lambda: pk.encrypt(x), repeat)
    probe = pk.encrypt(y)
    compare_ms, _ = _median_ms(lambda: sk.hamming_distance(ref + probe) <= x.size // 4, repeat)
    return _row("ntru", dim, NTRU_1024.security_bits, keygen_ms, encrypt_ms, compare_ms,
                len(pk.to_bytes()) + len(sk.to_bytes()), len(ref.to_bytes()))


def over_grid(dims, schemes, row) -> list[dict]:
    """``row(scheme, dim, a, b)`` for each dim × scheme, on the seeded synthetic pair (a, b) of that dim."""
    rng = np.random.default_rng(2)
    rows = []
    for dim in dims:
        a, b = _pair(dim, rng)
        rows += [row(scheme, dim, a, b) for scheme in schemes]
    return rows


def bench_lattice(dims=DIMS, schemes=SCHEMES, repeat: int = 15) -> list[dict]:
    def row(scheme: str, dim: int, a, b) -> dict:
        if scheme == "ckks":
            return _seal_row(CKKS_128, dim, a, b, 0.36, repeat)
        if scheme == "bfv":
            return _seal_row(BFV_128, dim, quantize(a), quantize(b), int(0.36 * 128**2), repeat)
        return _ntru_row(dim, a, b, repeat)

    return over_grid(dims, schemes, row)


def format_table(rows: list[dict]) -> str:
    head = f"{'scheme':6} {'dim':>4} {'bits':>4} {'keygen ms':>10} {'encrypt ms':>10} {'compare ms':>10} " \
           f"{'key bytes':>10} {'template B':>10}"
    lines = [head] + [f"{r['scheme']:6} {r['dim']:>4} {r['security_bits']:>4} {r['keygen_ms']:>10} "
                      f"{r['encrypt_ms']:>10} {r['compare_ms']:>10} {r['key_bytes']:>10} {r['template_bytes']:>10}"
                      for r in rows]
    return "\n".join(lines)
