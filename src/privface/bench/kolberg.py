"""`privface bench kolberg`: seed 002 Tab. 2–3 through the kolberg parties (Client, DBServer, AuthServer).

Same rows as ``bench.lattice`` (``{scheme, dim, security_bits, keygen_ms, encrypt_ms, compare_ms, key_bytes,
template_bytes}``, medians over ``repeat``), measured on the protocol instead of the bare crypto layer:

* ``keygen_ms``: ``AuthServer(params)`` (key pair generation at the auth server);
* ``encrypt_ms``: ``Client.enrol`` (template extraction + encryption + serialization of the ``EnrolRequest``);
* ``compare_ms``: ``DBServer.verify`` with the auth server in-process — reference loaded from the store and
  validated, probe validated, encrypted distance, ``DistanceBatch`` serialized, decryption (CKKS: flooded)
  and decision at the auth server, ``AuthDecision`` back: "distance + decryption + decision" of Tab. 2;
* ``key_bytes``: the public material the DB server needs, as on the wire (the ``kolberg.PublicKey`` message:
  public key, no relinearisation or Galois keys — the distance needs none);
* ``template_bytes``: one encrypted reference as stored (``EnrolRequest.template``).

Embeddings are synthetic unit-norm vectors (``bench.lattice._pair``); NTRU's LSSC edges are the quartiles of a
coordinate of a random unit vector in dimension d (±0.674/√d, 0), so each segment holds a quarter.
"""
from __future__ import annotations

import math

import numpy as np

from ..eval.kolberg_eval import security_bits
from ..protocols.kolberg import SCHEMES, AuthServer, Client, DBServer, KolbergParams
from ..store.sqlite import SQLiteStore
from .lattice import DIMS, _median_ms, _row, format_table, over_grid

__all__ = ["DIMS", "SCHEMES", "bench_kolberg", "deployment", "format_table", "synthetic_params"]


def synthetic_params(scheme: str, dim: int) -> KolbergParams:
    """KolbergParams for synthetic unit-norm embeddings of dimension ``dim`` (module docstring)."""
    q = 0.6745 / math.sqrt(dim)
    return KolbergParams(scheme, dims=dim, lssc_edges=(-q, 0.0, q))


def deployment(params: KolbergParams) -> tuple[AuthServer, Client, DBServer]:
    """The three parties in one process (DB server on an in-memory SQLite store)."""
    auth = AuthServer(params)
    pk = auth.public_key()
    return auth, Client(params, pk), DBServer(params, SQLiteStore(None), pk, auth.decide)


def _scheme_row(params: KolbergParams, a: np.ndarray, b: np.ndarray, repeat: int) -> dict:
    keygen_ms, _ = _median_ms(lambda: AuthServer(params), max(3, repeat // 3))
    auth, client, db = deployment(params)
    encrypt_ms, enrol = _median_ms(lambda: client.enrol("bench", a), repeat)
    db.enrol(enrol)
    probe = client.verify("bench", b)
    compare_ms, _ = _median_ms(lambda: db.verify(probe), repeat)
    return _row(params.scheme, params.dims, security_bits(params.scheme), keygen_ms, encrypt_ms, compare_ms,
                len(auth.public_key().to_bytes()), len(enrol.template))


def bench_kolberg(dims=DIMS, schemes=SCHEMES, repeat: int = 20) -> list[dict]:
    """One row per (scheme, dim) in the order dims × schemes."""
    return over_grid(dims, schemes, lambda scheme, dim, a, b: _scheme_row(synthetic_params(scheme, dim), a, b, repeat))
