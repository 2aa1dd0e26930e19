"""`privface bench gsm`: seed 004 Fig. 7 (bytes) and Fig. 8 (ms) — medians, parties in one process.

Templates are synthetic (Gaussian directions, fixed norm ζ; the terminal's a noisy copy). Columns:
``pi1_enc_ms`` the device packing and encrypting its template (Π1 enrolment); ``pi1_ms``, ``pi2_ms``,
``pi3_ms`` one matching phase after the reusable m1 was received and verified (round 2 to the decision,
all parties' compute, messages serialised and parsed); Π_en is the real two-round enrolment (§8 proofs):
``pien_enc_ms`` the device's round 1 (encryption with witnesses, Π_epk and Fig. 9 proofs), ``pien_ms`` the
rest (provider verification and Fig. 10 challenge, device response, verification, packing, signature);
``pien_d2sp_bytes`` = EnrolRequest + NormResponse, ``pien_sp2d_bytes`` = NormChallenge + signed m1. The terminal
draws the r^N of its rerandomisation from a pool filled ahead of time (an offline step, like the paper's
precomputation); ``rn_ms`` is the cost of one fresh r^N, to add when there is none. ``receive_ms`` is the
terminal's one-off precomputation for a reused m1 (``Terminal.receive(reuse=True)``: slot bases, window
tables). Bytes are wire frames.
"""
from __future__ import annotations

import statistics
import time

import numpy as np

from ..protocols.gsm import (
    Challenge,
    CompareChallenge,
    CompareFinish,
    CompareRequest,
    Decision,
    Device,
    EnrolRequest,
    GsmParams,
    Reply,
    ServiceProvider,
    Template,
    Terminal,
    zk,
)
from ..templates.fixed_norm import fixed_norm_template

GRID = [(ell, m) for m in (8, 16, 24) for ell in (128, 256, 512, 1024)]
KEYS = ("ell", "m", "paillier_bits", "pi1_enc_ms", "pi1_ms", "pien_enc_ms", "pien_ms", "pi2_ms", "pi3_ms",
        "pi1_m1_bytes", "pi1_t2d_bytes", "pi2_m1_bytes", "pi2_d2t_bytes", "pi2_t2d_bytes", "pi3_m1_bytes",
        "pi3_d2t_bytes", "pi3_t2d_bytes", "pien_d2sp_bytes", "pien_sp2d_bytes")


def _median_ms(samples: list[float]) -> float:
    return round(statistics.median(samples) * 1000, 2)


def _timed(fn, repeat: int):
    out, samples = None, []
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        samples.append(time.perf_counter() - t0)
    return out, _median_ms(samples)


def bench_one(ell: int, m: int, *, paillier_bits: int = 3072, repeat: int = 5, insecure_test_params: bool = False,
              pi3: bool = True) -> dict:
    params = GsmParams(ell=ell, m=m, paillier_bits=paillier_bits, insecure_test_params=insecure_test_params)
    rng = np.random.default_rng(0)
    x = rng.normal(size=ell)
    u = fixed_norm_template(x, m)
    w = fixed_norm_template(x + rng.normal(size=ell) * 0.3, m)
    sp = ServiceProvider(params, workers=None)  # Π_en on every core, as bench gsm-enrol (§9: "trivially parallelized")
    dev = Device("bench", params, provider_key=sp.public_key)
    term = Terminal(params, provider_key=sp.public_key)
    row: dict = {"ell": ell, "m": m, "paillier_bits": paillier_bits}

    m1_pi1, row["pi1_enc_ms"] = _timed(lambda: dev.pi1_enrol(u), repeat)
    term1 = Terminal(params)  # Π1's self-encoded m1 is unsigned (Fig. 3): a terminal without a provider key takes it
    e1, row["receive_ms"] = _timed(lambda: term1.receive(Template.from_bytes(m1_pi1.to_bytes()), "pi1", reuse=True), 1)
    sizes: dict = {}

    def pi1():
        ch = Challenge.from_bytes((c := term1.challenge(e1, w, "pi1"))[0].to_bytes())
        d = Decision.from_bytes(dev.pi1_decide(ch).to_bytes())
        sizes["pi1_t2d"] = len(c[0].to_bytes())
        return term1.pi1_finish(c[1], d)

    e1.pool.fill(repeat)
    _, row["pi1_ms"] = _timed(pi1, repeat)

    enrol: dict = {}

    def pien():
        """Π_en over wire bytes: round 1 (Π_en-Enc + Π_epk + Fig. 9, verified), Fig. 10, pack and sign."""
        t0 = time.perf_counter()
        req = dev.enrol_start(u, workers=None)
        t1 = time.perf_counter()
        req_b = req.to_bytes()
        ch, session = sp.enrol_start(EnrolRequest.from_bytes(req_b))
        ch_b = ch.to_bytes()
        resp_b = dev.enrol_respond(zk.NormChallenge.from_bytes(ch_b, dev.pk, ell), workers=None).to_bytes()
        m1 = sp.enrol_finish(session, zk.NormResponse.from_bytes(resp_b))
        enrol.setdefault("enc", []).append(t1 - t0)
        enrol["d2sp"], enrol["sp2d"] = len(req_b) + len(resp_b), len(ch_b) + len(m1.to_bytes())
        return m1

    m1, total_ms = _timed(pien, max(1, repeat // 2))
    dev.accept_enrolment(Template.from_bytes(m1.to_bytes()))
    # pien_enc_ms: the device's round-1 work (encryption with witnesses and both Fiat–Shamir proofs)
    row["pien_enc_ms"] = _median_ms(enrol["enc"])
    row["pien_ms"] = round(total_ms - row["pien_enc_ms"], 2)

    e2 = term.receive(dev.first_message(), "pi2", reuse=True)

    def pi2():
        ch, s = term.challenge(e2, w, "pi2")
        reply = Reply.from_bytes(dev.pi2_reply(Challenge.from_bytes(ch.to_bytes())).to_bytes())
        d = term.pi2_finish(s, reply)
        sizes["pi2_d2t"], sizes["pi2_t2d"] = len(reply.to_bytes()), len(ch.to_bytes()) + len(d.to_bytes())
        return d

    e2.pool.fill(repeat)
    _, row["pi2_ms"] = _timed(pi2, repeat)

    row["pi3_ms"] = None
    if pi3:
        e3 = term.receive(dev.first_message(), "pi3", reuse=True)

        def run3():
            ch, s = term.challenge(e3, w, "pi3")
            req3, ev = dev.pi3_request(Challenge.from_bytes(ch.to_bytes()))
            cc = CompareChallenge.from_bytes(term.pi3_compare(s, CompareRequest.from_bytes(req3.to_bytes())).to_bytes())
            fin = CompareFinish.from_bytes(dev.pi3_finish(ev, cc).to_bytes())
            d = term.pi3_finish(s, fin)
            sizes["pi3_d2t"] = len(req3.to_bytes()) + len(fin.to_bytes())
            sizes["pi3_t2d"] = len(ch.to_bytes()) + len(cc.to_bytes()) + len(d.to_bytes())
            return d

        e3.pool.fill(2 * repeat)
        _, row["pi3_ms"] = _timed(run3, repeat)

    signed = len(dev.first_message().to_bytes())
    row.update({
        "pi1_m1_bytes": len(m1_pi1.to_bytes()), "pi1_t2d_bytes": sizes["pi1_t2d"],
        "pi2_m1_bytes": signed, "pi2_d2t_bytes": sizes["pi2_d2t"], "pi2_t2d_bytes": sizes["pi2_t2d"],
        "pi3_m1_bytes": signed if pi3 else None, "pi3_d2t_bytes": sizes.get("pi3_d2t"),
        "pi3_t2d_bytes": sizes.get("pi3_t2d"),
        "pien_d2sp_bytes": enrol["d2sp"], "pien_sp2d_bytes": enrol["sp2d"],
    })
    _, row["rn_ms"] = _timed(lambda: dev.pk.random_rn(), 3)
    pp1, pp2 = e1.packing, e2.packing
    row.update({"pi1_n": pp1.n, "pi1_ciphertexts": len(m1_pi1.c_packed), "pi2_n": pp2.n,
                "pi2_ciphertexts": len(m1.c_packed), "layout": params.layout, "lambda": params.lam,
                "repeat": repeat, "rn_precomputed": True})
    return {k: row[k] for k in KEYS} | {k: v for k, v in row.items() if k not in KEYS}


def bench_gsm(grid, **kw) -> list[dict]:
    return [bench_one(ell, m, **kw) for ell, m in grid]


def format_table(rows: list[dict]) -> str:
    cols = ("ell", "m", "pi1_enc_ms", "pi1_ms", "pien_enc_ms", "pien_ms", "pi2_ms", "pi3_ms", "pi1_m1_bytes",
            "pi2_m1_bytes", "pi3_t2d_bytes")
    lines = ["  ".join(f"{c:>13}" for c in cols)]
    for r in rows:
        lines.append("  ".join(f"{'—' if r[c] is None else r[c]:>13}" for c in cols))
    return "\n".join(lines)
