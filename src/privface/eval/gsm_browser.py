"""`privface eval --protocol gsm --device browser`: the device side of every pair run by the browser's gsm
Device (web/src/gsm: the page's TypeScript, under Node through web/test/gsmDriver.ts — built by `make install`),
the terminal and provider in Python, in process. For each pair the Python Device answers the same terminal too
(Π2: the same challenge, whose reply must be byte-identical; Π3: its own session, its OT being randomised), so
the result counts the decisions where the two devices differ (``mismatches_vs_python_device``).
"""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

from ..errors import PrivfaceError
from ..protocols.gsm import (
    Challenge,
    CompareChallenge,
    CompareFinish,
    CompareRequest,
    Device,
    GsmParams,
    Reply,
    ServiceProvider,
    Terminal,
)
from ..service.clients.gsm import device_key_record

DRIVER = Path(__file__).resolve().parents[3] / "web" / "dist-test" / "gsmDriver.mjs"


class BrowserDevice:
    """The TypeScript Device in a Node subprocess (JSON lines), holding the same key as ``device``."""

    def __init__(self, device: Device, params: GsmParams, gmp: bool = True) -> None:
        if shutil.which("node") is None or not DRIVER.is_file():
            raise PrivfaceError("--device browser needs Node.js and the built web/ of a source checkout "
                                "(web/dist-test/gsmDriver.mjs): run make install")
        self.proc = subprocess.Popen(["node", str(DRIVER)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.ms = 0.0
        if gmp:
            self("backend", name="gmp")
        pj = {"ell": params.ell, "m": params.m, "cos_threshold": params.cos_threshold, "lam": params.lam,
              "paillier_bits": params.paillier_bits, "insecure_test_params": params.insecure_test_params}
        self("import", dev="d", key=device_key_record(device, "http://127.0.0.1/").to_bytes().hex(), params=pj)

    def __call__(self, cmd: str, **kw) -> dict:
        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.write(json.dumps({"cmd": cmd, **kw}) + "\n")
        self.proc.stdin.flush()
        out = json.loads(self.proc.stdout.readline())
        if "error" in out:
            raise PrivfaceError(f"browser device: {out['type']}: {out['error']}")
        self.ms += float(out.get("ms", 0.0))
        return out

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        self.proc.wait(timeout=30)


def run_chunk(params: GsmParams, variant: str, templates: dict, pairs: list[tuple[int, int]]) -> list[tuple]:
    """(browser decision, Python Device decision, browser device ms) per pair."""
    if variant == "pi1":
        raise PrivfaceError("--device browser runs pi2 or pi3 (Π1's m1 is the device's own, unsigned)")
    sp = ServiceProvider(params, insecure_skip_proofs=True)
    device = Device("eval", params, provider_key=sp.public_key)
    terminal = Terminal(params, provider_key=sp.public_key)
    browser = BrowserDevice(device, params)
    out, enrolled_now, first = [], None, None
    try:
        for i, j in pairs:
            if enrolled_now != i:
                m1 = sp.enrol_unproven(device.unproven_enrol_request(templates[i]))
                device.accept_enrolment(m1)
                browser("m1", dev="d", m1=m1.to_bytes().hex())
                first = terminal.receive(m1, variant, reuse=True)
                enrolled_now = i
            browser.ms = 0.0
            ch, session = terminal.challenge(first, templates[j], variant)
            if variant == "pi2":
                reply = Reply.from_bytes(bytes.fromhex(browser("reply", dev="d", variant="pi2",
                                                               challenge=ch.to_bytes().hex())["hex"]))
                if reply != device.pi2_reply(Challenge.from_bytes(ch.to_bytes())):
                    raise PrivfaceError("the browser device's Π2 reply differs from the Python Device's")
                d = terminal.pi2_finish(session, reply)
                py = d
            else:
                req = CompareRequest.from_bytes(bytes.fromhex(browser("pi3_request", dev="d",
                                                                      challenge=ch.to_bytes().hex())["hex"]))
                cc = terminal.pi3_compare(session, req)
                fin = CompareFinish.from_bytes(bytes.fromhex(browser("pi3_finish", dev="d",
                                                                     compare=cc.to_bytes().hex())["hex"]))
                d = terminal.pi3_finish(session, fin)
                ch2, s2 = terminal.challenge(first, templates[j], variant)
                req2, ev = device.pi3_request(ch2)
                py = terminal.pi3_finish(s2, device.pi3_finish(ev, CompareChallenge.from_bytes(
                    terminal.pi3_compare(s2, req2).to_bytes())))
            if d.aborted or py.aborted:
                raise RuntimeError("an honest gsm run aborted (⊥): parameters are inconsistent")
            out.append((d.match, py.match, browser.ms))
    finally:
        browser.close()
    return out
