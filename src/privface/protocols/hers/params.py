"""HERS parameters (seed 003 §3.1 and §5: the HERS baseline over CKKS).

Parameters ``HERS_CKKS``: N = 8192 (4096 slots), one 60-bit data prime q₀ and a 60-bit special prime: log q = 120
≤ 152, so 192-bit by the HE standard table (SEAL's, ≥ the 128 asked for; one prime is all IP_DB needs).
No rescaling: Δ_x·Δ_y = 2^36·2^20 = 2^56 < q₀/8, which holds |⟨x, y⟩| ≤ 1 (unit vectors) with room for the
noise.

Precision (``HERS_ERROR``). The decrypted score approximates ⟨x, ŷ⟩ with ŷ_j = round(2^20·y_j)/2^20 (|y_j − ŷ_j|
≤ 2^−21, so |⟨x, y⟩ − ⟨x, ŷ⟩| ≤ 2^−21·‖x‖₁ ≤ 2^−21·√d); the CKKS error (fresh noise ≈ 2^16 in a slot at scale
Δ_x, weighted by Δ_y·y_j) adds about 2^−19 (measured worst case: docs, idface page). ``HERS_ERROR`` = 2^−16
is the bound the tests assert (decisions closer than that to τ or to the runner-up may differ from plaintext).
"""
from __future__ import annotations

from ...crypto.lattice import CKKS, LatticeParams

#: CKKS N = 8192 with one 60-bit data prime and a 60-bit special prime; gallery scale Δ_x = 2^36.
HERS_CKKS = LatticeParams("ckks-8192-q60", CKKS, 8192, (60, 60), scale_bits=36)
#: The query's scale Δ_y = 2^20.
QUERY_SCALE_BITS = 20
#: The bound on |decrypted score − ⟨x, y⟩| the tests assert.
HERS_ERROR = 2.0 ** -16
