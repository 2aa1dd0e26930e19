"""Erasing one identity's base-p digits from IDFace-CKKS block ciphertexts (seed 003 §4.3's coefficient packing)
without giving the gallery to the key holder: a masked refresh whose digit removal is a garbled circuit.

Why a two-party computation. Template t of a block is digit i = ⌊t/n⌋ of coefficient c = t mod n of every
column ciphertext C^σ_j: the coefficient is Δ·V + e, V = Σ_k p^k·b_k with bits b_k (T_α's separated ±1 positions,
``ckks``). Zeroing digit i means subtracting Δ·p^i·b_i, and b_i is not a linear function of V: no public operation
computes it, so the holder of the ciphertexts (S_local, pk only) and the key holder (S_key) compute it jointly.

1. ``DigitEraseHolder.start`` (S_local): per column ciphertext a uniform pad r ∈ Z_q^n (coefficient form) is added
   to c₀ — S_key decrypts w = Δ·V + e + r mod q, uniform whatever V is (as ``crypto.ckks_refresh``, one copy: no
   rescale follows, so no wrap-around needs avoiding). Per target (ciphertext, c, i) S_local draws s uniform mod q.
2. ``DigitEraseKey.open`` (S_key) garbles, per target, ``digit_circuit``: from its w_c and S_local's
   r'_c = r_c − Δ/2 and s_c (both S_local's inputs, by IKNP OT extension, ``crypto.otext``) it computes
   x = w − r' mod q = Δ·V + e + Δ/2, V = ⌊x / Δ⌋ (|e| < Δ/2), b_i by greedy decoding (V's digits are bits:
   for k = m − 1 … i + 1, subtract p^k where V ≥ p^k — or one wire when p is a power of two), and outputs
   y = Δ·p^i·b_i + s mod q. Half-gates garbling (``crypto.garble``, ZRE15); S_local evaluates and returns the
   output labels, S_key decodes y — uniform, since s is.
3. ``DigitEraseKey.close``: Z = W − Σ_c y_c·X^c, encrypted afresh under s (symmetric RLWE at q₀, uniform a,
   centred binomial error η = 24); ``DigitEraseHolder.finish``: Enc(Z) − r + Σ s_c·X^c = Enc(Δ·(V − p^i·b_i) + e).
   The digit is 0; the other digits keep their values and their old encryption noise e (that of fresh public-key
   encryptions, independent of every template); the ciphertext is S_key's fresh one less a plaintext, sharing no
   byte with the old one, and its noise grows by a fresh symmetric error only (σ ≈ 3.5), so the lift's IP_DB
   bound (``ckks.LIFT_NOISE_BOUND``) still holds.

What S_key learns: uniform w and y, and the positions (c, i) of the erased slots (not their values); semi-honest
Yao and OT hide S_local's inputs. What S_local learns: garbled tables and labels, and ciphertexts under pk.
Semi-honest, as the refresh of ``crypto.ckks_refresh`` (a malicious S_key could re-encrypt something else).
"""
from __future__ import annotations

import functools

import numpy as np

from ...crypto import garble, seal_arrays
from ...crypto.ckks_refresh import binomial, uniform
from ...crypto.otext import IKNPReceiver, IKNPSender
from ...errors import ProtocolError
from .ckks import NOISE_BITS, PAYLOAD_BITS

LABEL = garble.LABEL_BYTES


@functools.lru_cache(maxsize=64)
def digit_circuit(q: int, p: int, m: int, i: int) -> garble.Circuit:
    """Garbler input w (|q| bits), evaluator inputs r' then s (|q| bits each); output y = Δ·p^i·b_i + s mod q with
    b_i digit i of V = ⌊(w − r' mod q) / Δ⌋ (module docstring, step 2)."""
    qb = q.bit_length()
    B = garble.CircuitBuilder()
    w, r, s = B.garbler_input(qb), B.evaluator_input(qb), B.evaluator_input(qb)
    zero = B.constant(0, 1)[0]
    diff, ge = B._x_plus_not_y_plus_1(w + [zero], r + [zero])
    lt = B.inv(ge)
    x = B.add(diff, [lt if bit else zero for bit in garble.to_bits(q, qb + 1)])[:qb]  # w − r' mod q
    V = x[NOISE_BITS:]
    if p & (p - 1) == 0:
        b = V[i * (p.bit_length() - 1)]
    else:
        for k in range(m - 1, i, -1):  # greedy: every digit is a bit and Σ_{j<k} p^j < p^k
            d, g = B._x_plus_not_y_plus_1(V, B.constant(p ** k, len(V)))
            V = [B.xor(v, B.and_(g, B.xor(v, dv))) for v, dv in zip(V, d)]
        b = B.ge(V, B.constant(p ** i, len(V)))
    c = garble.to_bits(((1 << NOISE_BITS) * p ** i) % q, qb + 1)
    t = B.add(s + [zero], [b if bit else zero for bit in c])
    d, g = B._x_plus_not_y_plus_1(t, B.constant(q, qb + 1))
    B.output(*[B.xor(tv, B.and_(g, B.xor(tv, dv))) for tv, dv in zip(t[:qb], d[:qb])])
    return B.build()


def _bits(values: np.ndarray, k: int) -> np.ndarray:
    """(T,) uint64 → (T, k) uint8, little-endian."""
    return ((values[:, None] >> np.arange(k, dtype=np.uint64)) & np.uint64(1)).astype(np.uint8)


class _Common:
    def __init__(self, public, params) -> None:
        self.public, self.params, self.n = public, params, public.n
        self.pid = public.seal_context.first_parms_id()
        levels = public._levels[tuple(self.pid)]
        if len(levels) != 1:
            raise ProtocolError("digit erasure is for ciphertexts stored at one prime q₀")
        self.q = int(levels[0])
        self.qv = np.array([[self.q]], dtype=np.uint64)
        self.p = params.base
        self.m = params.templates_per_slot(PAYLOAD_BITS)
        self.qb = self.q.bit_length()

    def _ntt(self, coeffs: np.ndarray) -> np.ndarray:
        """(k, n) residues mod q → (k, n) NTT form."""
        return seal_arrays.ntt(self.public.seal_context, self.public.evaluator, self.pid, coeffs[:, None, :])[:, 0]

    def _check_targets(self, targets, k: int) -> np.ndarray:
        t = np.asarray(targets)
        if (t.ndim != 2 or t.shape[1] != 3 or t.shape[0] < 1 or t.dtype.kind not in "iu" or np.any(t < 0)
                or np.any(t[:, 0] >= k) or np.any(t[:, 1] >= self.n) or np.any(t[:, 2] >= self.m)):
            raise ProtocolError("digit erasure: targets must be (ciphertext, coefficient, digit) rows in range")
        return t.astype(np.int64)

    def _check_cts(self, cts, what: str) -> np.ndarray:
        if (not isinstance(cts, np.ndarray) or cts.dtype != np.uint64 or cts.ndim != 4
                or cts.shape[1:] != (2, 1, self.n) or cts.shape[0] < 1):
            raise ProtocolError(f"{what}: expected uint64 ciphertexts (k, 2, 1, {self.n})")
        if np.any(cts >= np.uint64(self.q)):
            raise ProtocolError(f"{what}: a residue is not below q₀")
        return cts


class GarbledHolder:
    """The evaluator's side of a batch of garbled circuits whose evaluator inputs come by IKNP OT extension: a
    subclass's step 1 sets ``self._state`` with "circuits" (the ``garble.Circuit`` per target) and "choices" (its
    input bits, circuit after circuit)."""

    _state: dict

    def evaluate(self, opened: dict) -> dict:
        """Step 2 (the receiver's part of the OT): {"ot_response", "u"} for the garbler."""
        st = self._state
        st["opened"], st["ot"] = opened, IKNPReceiver()
        response = st["ot"].setup_response(opened["ot_request"])
        u, st["keys"] = st["ot"].extend(st["choices"], LABEL)
        return {"ot_response": response, "u": u}

    def labels(self, pads: np.ndarray) -> list[bytes]:
        """Step 2: this side's input labels from the OT pads, every circuit evaluated; the output labels."""
        st, opened = self._state, self._state["opened"]
        circuits, choices = st["circuits"], st["choices"]
        if not isinstance(pads, np.ndarray) or pads.shape != (choices.size, 2, LABEL) or pads.dtype != np.uint8:
            raise ProtocolError("erasure: OT pads of the wrong shape")
        mine = pads[np.arange(pads.shape[0]), choices] ^ st["keys"]
        gcs, glabels = opened["circuits"], opened["garbler_labels"]
        if len(gcs) != len(circuits) or len(glabels) != len(circuits):
            raise ProtocolError("erasure: one garbled circuit per target expected")
        out, at = [], 0
        for j, circuit in enumerate(circuits):
            per = len(circuit.evaluator_inputs)
            gc = garble.GarbledCircuit.from_bytes(gcs[j])
            out.append(b"".join(garble.evaluate(circuit, gc, glabels[j], [bytes(x) for x in mine[at:at + per]])))
            at += per
        return out


class GarbledKey:
    """The garbler's side: ``_garble`` (step 2's first message), ``transfer`` (the OT's second), ``_decode``."""

    _state: dict

    def _garble(self, circuits: list, garbler_bits: list) -> dict:
        garbled, glabels, garblings = [], [], []
        for circuit, bits in zip(circuits, garbler_bits):
            gc, g = garble.garble(circuit)
            garbled.append(gc.to_bytes())
            glabels.append(g.garbler_labels(bits))
            garblings.append(g)
        ot = IKNPSender()
        self._state.update(g=garblings, ot=ot)
        return {"ot_request": ot.setup_request(), "circuits": garbled, "garbler_labels": glabels}

    def transfer(self, reply: dict) -> np.ndarray:
        """The OT's second message: per evaluator input wire (label₀ ⊕ k₀, label₁ ⊕ k₁), (M, 2, 16) uint8."""
        st = self._state
        st["ot"].setup_finish(reply["ot_response"])
        pairs = [pair for g in st["g"] for pair in g.evaluator_label_pairs()]
        k0, k1 = st["ot"].extend(reply["u"], len(pairs), LABEL)
        labels = np.frombuffer(b"".join(a + b for a, b in pairs), dtype=np.uint8).reshape(len(pairs), 2, LABEL)
        return labels ^ np.stack([k0, k1], axis=1)

    def _decode(self, outputs) -> list[int]:
        """The value of each circuit's output (little-endian bits); a label that is neither of its wire's is an
        ``OutputLabelError``, a malformed list a ProtocolError."""
        gs = self._state["g"]
        if not isinstance(outputs, list) or len(outputs) != len(gs):
            raise ProtocolError("erasure: one output per garbled circuit expected")
        out = []
        for g, raw in zip(gs, outputs):
            k = len(g.circuit.outputs)
            if not isinstance(raw, bytes) or len(raw) != LABEL * k:
                raise ProtocolError("erasure: output labels of the wrong length")
            out.append(garble.from_bits(g.decode([raw[i:i + LABEL] for i in range(0, len(raw), LABEL)])))
        return out


class DigitEraseHolder(_Common, GarbledHolder):
    """S_local's side (pk only); one erasure at a time: ``start`` → ``evaluate`` → ``labels`` → ``finish``."""

    @property
    def ct_bytes(self) -> int:
        """One column ciphertext on the wire (sent padded in one message, answered fresh in another)."""
        return 2 * self.n * 8

    def target_bytes(self, row) -> int:
        return circuit_bytes(digit_circuit(self.q, self.p, self.m, int(row[2])))

    def start(self, cts: np.ndarray, targets) -> dict:
        """Step 1: the message to S_key {"masked", "targets"}; pads and choices stay here."""
        cts = self._check_cts(cts, "digit erasure")
        t = self._check_targets(targets, cts.shape[0])
        r = uniform(self.q, cts.shape[0] * self.n).reshape(cts.shape[0], self.n)
        masked = cts.copy()
        masked[:, 0, 0] += self._ntt(r)
        masked[:, 0, 0] %= np.uint64(self.q)
        s = uniform(self.q, t.shape[0])
        rp = (r[t[:, 0], t[:, 1]] + np.uint64(self.q - (1 << (NOISE_BITS - 1)))) % np.uint64(self.q)
        self._state = {"r": r, "s": s, "t": t, "k": cts.shape[0],
                       "circuits": [digit_circuit(self.q, self.p, self.m, int(i)) for i in t[:, 2]],
                       "choices": np.concatenate([_bits(rp, self.qb), _bits(s, self.qb)], axis=1).ravel()}
        return {"masked": masked, "targets": t}

    def finish(self, fresh: np.ndarray) -> np.ndarray:
        """Step 3: Enc(Z) − r + Σ s_c·X^c per ciphertext: (k, 2, 1, n), the target digits 0."""
        st = self._state
        fresh = self._check_cts(fresh, "the key holder's answer")
        if fresh.shape[0] != st["k"]:
            raise ProtocolError(f"digit erasure: {fresh.shape[0]} ciphertexts answered, {st['k']} sent")
        back = (np.uint64(self.q) - st["r"]) % np.uint64(self.q)
        t = st["t"]
        np.add.at(back, (t[:, 0], t[:, 1]), st["s"])  # < 2^64: at most m targets per coefficient
        back %= np.uint64(self.q)
        out = fresh.copy()
        out[:, 0, 0] += self._ntt(back)
        out[:, 0, 0] %= np.uint64(self.q)
        del self._state
        return out


class DigitEraseKey(_Common, GarbledKey):
    """S_key's side (its secret key s): ``open`` → ``transfer`` → ``close``."""

    def __init__(self, secret, params) -> None:
        super().__init__(secret.public, params)
        self._s = seal_arrays.secret_key_array(secret._secret_key, self.n, 1)

    def open(self, request: dict) -> dict:
        """Decrypt the masked ciphertexts (uniform w), garble one ``digit_circuit`` per target; the OT's first
        message. Everything incoming is checked first."""
        masked = self._check_cts(request.get("masked"), "digit erasure")
        t = self._check_targets(request.get("targets"), masked.shape[0])
        plain = seal_arrays.decrypt_arrays(masked, self._s, self.qv)
        w = seal_arrays.inverse_ntt(self.public.seal_context, self.public.evaluator, self.pid, plain)[:, 0]
        wt = _bits(w[t[:, 0], t[:, 1]], self.qb)
        self._state = {"w": w, "t": t}
        return self._garble([digit_circuit(self.q, self.p, self.m, int(i)) for i in t[:, 2]], wt.tolist())

    def close(self, outputs: list[bytes]) -> np.ndarray:
        """Decode y per target (a label that is neither of its wire's is refused), subtract it from W, encrypt
        every W afresh: (k, 2, 1, n)."""
        ys = self._decode(outputs)
        st = self._state
        w = st["w"]
        for (ct, c, _), y in zip(st["t"], ys):
            w[ct, c] = (int(w[ct, c]) - y) % self.q
        del self._state
        return self._encrypt(w)

    def _encrypt(self, z: np.ndarray) -> np.ndarray:
        """Symmetric RLWE at q₀: (NTT(z + e) − a·s, a), a uniform, e centred binomial (η = 24)."""
        k = z.shape[0]
        e = binomial(k * self.n).reshape(k, self.n)
        ze = (z.astype(np.int64) % self.q).astype(np.uint64)
        ze = (ze + (e % self.q).astype(np.uint64)) % np.uint64(self.q)
        a = uniform(self.q, k * self.n).reshape(k, self.n)
        out = np.empty((k, 2, 1, self.n), dtype=np.uint64)
        out[:, 1, 0] = a
        As = seal_arrays.mulmod(a, self._s, self.qv)
        out[:, 0, 0] = (self._ntt(ze) + (np.uint64(self.q) - As)) % np.uint64(self.q)
        return out


def erase_digits(holder, key, cts, targets) -> tuple:
    """Run the exchanges between S_local's ``holder`` (``DigitEraseHolder``, ``paillier_erase.PaillierEraseHolder``)
    and S_key's ``key`` (in process, or a link with ``open``, ``transfer``, ``close``): (the erased ciphertexts,
    {"bytes_sent", "bytes_received", "and_gates", "exchanges"}). A link with ``group_bytes`` (over HTTP:
    ``scale.erase_link``) gets the targets in groups whose messages stay under that many bytes: each group is a
    whole erasure of the ciphertexts it names (fresh pads, OT and garbling), run one after another on the
    ciphertexts as the previous groups left them."""
    t = np.asarray(targets)
    budget = getattr(key, "group_bytes", None)
    if budget is None:
        return _erase_once(holder, key, cts, t)
    work = cts.copy() if isinstance(cts, np.ndarray) else list(cts)
    total = {"bytes_sent": 0, "bytes_received": 0, "and_gates": 0, "exchanges": 0}
    for idx, rows in target_groups(holder, t, budget):
        part = work[idx] if isinstance(work, np.ndarray) else [work[i] for i in idx]
        local = rows.copy()
        local[:, 0] = np.searchsorted(idx, rows[:, 0])
        out, r = _erase_once(holder, key, part, local)
        for j, i in enumerate(idx):
            work[i] = out[j]
        total = {k: total[k] + r[k] for k in total}
    return work, total


def target_groups(holder, t: np.ndarray, budget: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """The targets cut into groups (ciphertext indices ascending, their target rows) whose estimated messages
    (masked ciphertexts, garbled circuits, labels, OT) stay under ``budget`` bytes; a ciphertext with more targets
    than fit one group recurs in the next (always at least one target per group)."""
    t = t[np.argsort(t[:, 0], kind="stable")]
    groups, cts, rows, cost = [], [], [], 0
    for row in t:
        ct = int(row[0])
        c = holder.target_bytes(row)
        new = ct not in cts
        add = c + (holder.ct_bytes if new else 0)
        if rows and cost + add > budget:
            groups.append((np.array(cts, dtype=np.int64), np.array(rows, dtype=np.int64)))
            cts, rows, cost, new, add = [], [], 0, True, c + holder.ct_bytes
        if new:
            cts.append(ct)
        rows.append(row)
        cost += add
    if rows:
        groups.append((np.array(cts, dtype=np.int64), np.array(rows, dtype=np.int64)))
    return groups


def circuit_bytes(circuit: garble.Circuit) -> int:
    """The bytes one target's circuit puts on the wire: its garbled tables, the garbler's labels, the OT's pads and
    u for the evaluator's inputs, its output labels."""
    ins = len(circuit.evaluator_inputs)
    return (64 + 32 * circuit.and_count + 16 * circuit.half_count
            + LABEL * (len(circuit.garbler_inputs) + len(circuit.constants) + len(circuit.outputs)) + 50 * ins)


def _erase_once(holder, key, cts, targets) -> tuple:
    request = holder.start(cts, targets)
    ands = sum(c.and_count for c in holder._state["circuits"])
    opened = key.open(request)
    reply = holder.evaluate(opened)
    pads = key.transfer(reply)
    outputs = holder.labels(pads)
    fresh = key.close(outputs)
    out = holder.finish(fresh)
    return out, {"bytes_sent": _size(request) + _size(reply) + _size(outputs),
                 "bytes_received": _size(opened) + _size(pads) + _size(fresh), "and_gates": int(ands),
                 "exchanges": 3}


def _size(x) -> int:
    """Bytes of a message as it would travel: arrays and bytes as they are, integers minimal, containers summed."""
    if isinstance(x, np.ndarray):
        return int(x.nbytes)
    if isinstance(x, (bytes, bytearray)):
        return len(x)
    if isinstance(x, dict):
        return sum(_size(v) for v in x.values())
    if isinstance(x, (list, tuple)):
        return sum(_size(v) for v in x)
    return (int(x).bit_length() + 7) // 8


__all__ = ["DigitEraseHolder", "DigitEraseKey", "GarbledHolder", "GarbledKey", "circuit_bytes", "digit_circuit",
           "erase_digits", "target_groups"]
