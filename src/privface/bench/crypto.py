"""`privface bench crypto`: median timings of the additively homomorphic crypto core.

One row per (scheme, modulus bits, operation): ``{"scheme", "bits", "op", "median_ms"}``, plus
``repeat`` and, where they apply, ``base_decryptions``, ``workers``, ``speedup`` and ``n`` (values per
packed plaintext). Paillier 2048/3072 and Joye–Libert ``JL_112``/``JL_128``: key generation, encryption
(public and by the key owner; Paillier also from an r^N pool), decryption, ⊞, scalar multiplication,
parsing a serialized ciphertext. Catalano–Fiore: ESED of two 128-D vectors and its level-2 decryption
(k + 1 base decryptions) serial and on one thread per core, with the speedup measured in the same run,
and the same SED decrypted through the original transform (2k + 1). Packing: Encode₁ of a 256-D
vector, Mask, Decode₂ with the solver's parameters (m = 16, λ = 40, 3072 bits), both layouts.
Garbled-circuit secure comparison (``gc-compare``, k = 64, also with ``bytes``): see ``bench.compare``.
"""
from __future__ import annotations

import os
import secrets
import statistics
import time
from functools import partial

from ..crypto import catalano_fiore as cf
from ..crypto import packing
from ..crypto.joye_libert import JL_112, JL_128, JLParams, generate_joye_libert_keypair
from ..crypto.paillier import RnPool, generate_paillier_keypair
from ..errors import CryptoError
from .compare import gc_compare_rows

ESED_DIM = 128


def _median_ms(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1000)
    return float(f"{statistics.median(times):.4g}")


def _row(scheme: str, bits: int, op: str, median_ms: float, repeat: int, **extra) -> dict:
    return {"scheme": scheme, "bits": bits, "op": op, "median_ms": median_ms, "repeat": repeat, **extra}


def _lhe_rows(scheme: str, bits: int, keygen, repeat: int, keygen_repeat: int) -> tuple[list[dict], tuple]:
    keys = []
    rows = [_row(scheme, bits, "keygen", _median_ms(lambda: keys.append(keygen()), keygen_repeat), keygen_repeat)]
    pk, sk = keys[-1]
    space = pk.message_space
    c, c2 = pk.encrypt(secrets.randbelow(space)), pk.encrypt(secrets.randbelow(space))
    data = c.to_bytes()
    ops = [("encrypt", lambda: pk.encrypt(12345)), ("encrypt_owner", lambda: sk.encrypt(12345))]
    if scheme == "paillier":
        pool = RnPool(sk, repeat)
        ops.append(("encrypt_pool", lambda: pk.encrypt(12345, pool=pool)))
    ops += [("decrypt", lambda: sk.decrypt(c)), ("add", lambda: c + c2),
            ("scalar_mul", lambda: c * secrets.randbelow(space)),
            ("scalar_mul_16bit", lambda: c * secrets.randbelow(2**16)),
            ("from_bytes", lambda: type(c).from_bytes(pk, data))]
    rows += [_row(scheme, bits, op, _median_ms(fn, repeat), repeat) for op, fn in ops]
    return rows, (pk, sk)


def _cf_rows(scheme: str, bits: int, pk, sk, repeat: int, workers: int) -> list[dict]:
    u = [secrets.randbelow(257) - 128 for _ in range(ESED_DIM)]
    v = [secrets.randbelow(257) - 128 for _ in range(ESED_DIM)]
    C, C2 = [cf.encrypt(sk, x) for x in u], [cf.encrypt(pk, x) for x in v]
    evaluated = []
    esed_ms = _median_ms(lambda: evaluated.append(cf.esed(C, C2)), max(1, repeat // 2))
    s, original = evaluated[-1], cf.sed_original(C, C2)
    expected = sum((a - b) ** 2 for a, b in zip(u, v))
    if not cf.decrypt(sk, s) == expected == cf.decrypt(sk, original):
        raise CryptoError("Catalano-Fiore benchmark decrypted a wrong squared distance")
    serial = _median_ms(lambda: cf.decrypt(sk, s, workers=1), repeat)
    parallel = _median_ms(lambda: cf.decrypt(sk, s, workers=workers), repeat)
    orig = _median_ms(lambda: cf.decrypt(sk, original, workers=1), repeat)
    name, op = f"cf-{scheme}", f"dec2_esed_k{ESED_DIM}"
    return [
        _row(name, bits, f"esed_k{ESED_DIM}", esed_ms, max(1, repeat // 2)),
        _row(name, bits, f"{op}_serial", serial, repeat, base_decryptions=s.base_decryptions, workers=1),
        _row(name, bits, f"{op}_parallel", parallel, repeat, base_decryptions=s.base_decryptions, workers=workers,
             speedup=round(serial / parallel, 2), loadavg_1min=round(os.getloadavg()[0], 2)),
        _row(name, bits, f"dec2_sed_original_k{ESED_DIM}_serial", orig, repeat,
             base_decryptions=original.base_decryptions, workers=1),
    ]


def _packing_rows(bits: int, repeat: int) -> list[dict]:
    rows = []
    vector = [secrets.randbelow(2**16) for _ in range(256)]
    for layout in packing.LAYOUTS:
        params = packing.solve(16, bits, 40, len(vector), layout=layout)
        encoded = packing.encode1_vector(params, vector)
        product = sum(packing.mult(a, b) for a, b in zip(encoded, encoded))
        masked = packing.mask(params, product)
        name, n = f"packing-{layout}", params.n
        rows += [
            _row(name, bits, "encode1_vector_l256", _median_ms(partial(packing.encode1_vector, params, vector), repeat),
                 repeat, n=n),
            _row(name, bits, "mask", _median_ms(partial(packing.mask, params, product), repeat), repeat, n=n),
            _row(name, bits, "decode2", _median_ms(partial(packing.decode2, params, masked), repeat), repeat, n=n),
        ]
    return rows


def bench_crypto(*, repeat: int = 15, cf_repeat: int = 5, keygen_repeat: int = 3, workers: int | None = None,
                 insecure_test_params: bool = False) -> list[dict]:
    """All rows (see the module docstring). ``insecure_test_params`` swaps in toy sizes for a smoke test."""
    workers = workers or os.cpu_count() or 1
    if insecure_test_params:
        paillier_bits, jl_params = (512,), (JLParams(512, 64),)
    else:
        paillier_bits, jl_params = (2048, 3072), (JL_112, JL_128)
    rows, cf_keys = [], []
    for bits in paillier_bits:
        r, keys = _lhe_rows("paillier", bits, lambda b=bits: generate_paillier_keypair(
            b, insecure_test_params=insecure_test_params), repeat, keygen_repeat)
        rows += r
        cf_keys.append(("paillier", bits, keys))
    for params in jl_params:
        r, keys = _lhe_rows("joye-libert", params.bits, lambda p=params: generate_joye_libert_keypair(
            p, insecure_test_params=insecure_test_params), repeat, keygen_repeat)
        rows += r
        cf_keys.append(("joye-libert", params.bits, keys))
    for scheme, bits, (pk, sk) in cf_keys:
        if scheme == "joye-libert" or bits == paillier_bits[0]:
            rows += _cf_rows(scheme, bits, pk, sk, cf_repeat, workers)
    rows += _packing_rows(1024 if insecure_test_params else 3072, repeat)
    rows += gc_compare_rows(_median_ms, _row, repeat=min(repeat, 7))
    return rows


def format_table(rows: list[dict]) -> str:
    """A human table: scheme, bits, op, median ms, and the extra fields of each row."""
    lines = [f"{'scheme':<18}{'bits':>6}  {'op':<34}{'median ms':>12}  notes"]
    for r in rows:
        notes = "  ".join(f"{k}={v}" for k, v in r.items() if k not in ("scheme", "bits", "op", "median_ms", "repeat"))
        lines.append(f"{r['scheme']:<18}{r['bits']:>6}  {r['op']:<34}{r['median_ms']:>12.4g}  {notes}")
    return "\n".join(lines)
