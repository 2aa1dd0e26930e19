"""The papers' figures (papers.json, one row per quoted number) and ours next to them.

Every row cites where the number is (``where``), the number as printed (``quote``), its ``value`` and ``unit``; the
paper's setting is the paper's ``setting`` unless the row has its own. ``ours`` names the job and result field
measured against it; ``n`` scales a `bench identify` figure linearly from our largest gallery to the paper's.
"""
from __future__ import annotations

import json
import re
from functools import cache
from importlib import resources

#: Factor to the base unit (seconds, bytes, fraction) of every unit a row may use.
UNITS = {"ms": ("time", 1e-3), "s": ("time", 1.0), "B": ("bytes", 1.0), "KiB": ("bytes", 1024.0),
         "KB": ("bytes", 1e3), "kB": ("bytes", 1e3), "MB": ("bytes", 1e6), "GB": ("bytes", 1e9), "%": ("rate", 1e-2),
         "fraction": ("rate", 1.0), "": ("number", 1.0), "×": ("number", 1.0)}
#: The unit a row is shown in: the page has one unit system, SI (1 kB = 1000 B), whatever the paper printed.
SHOWN_UNIT = {"KiB": "kB", "KB": "kB"}
BETTER = ("lower", "higher")
PAPERS = ("im2020", "cryptomask", "kolberg", "idface", "gsm")
ROW_KEYS = {"paper", "where", "quantity", "value", "unit", "quote"}


@cache
def load() -> dict:
    """papers.json, checked (``validate``)."""
    data = json.loads(resources.files(__package__).joinpath("papers.json").read_text(encoding="utf-8"))
    validate(data)
    return data


def validate(data: dict) -> None:
    """Every row cites a known paper, where, a quote, a finite value in a known unit, and the quote holds the value."""
    for name in PAPERS:
        p = data["papers"][name]
        for key in ("seed", "file", "title", "setting"):
            if not p.get(key):
                raise ValueError(f"papers.json: paper {name} lacks {key}")
    for k, row in enumerate(data["rows"]):
        missing = ROW_KEYS - row.keys()
        if missing:
            raise ValueError(f"papers.json row {k}: missing {sorted(missing)}")
        if row["paper"] not in PAPERS or row["unit"] not in UNITS or not row["where"] or not row["quote"]:
            raise ValueError(f"papers.json row {k}: bad paper, unit, where or quote: {row}")
        if not isinstance(row["value"], int | float):
            raise ValueError(f"papers.json row {k}: value is not a number")
        if quoted_number(row["quote"]) != float(row["value"]):
            raise ValueError(f"papers.json row {k}: quote {row['quote']!r} does not hold {row['value']}")
        ours = row.get("ours")
        if ours is not None:
            if ours.get("unit") not in UNITS or UNITS[ours["unit"]][0] != UNITS[row["unit"]][0]:
                raise ValueError(f"papers.json row {k}: our unit {ours.get('unit')!r} is not a {row['unit']!r} kind")
            if not ours.get("job") or not ours.get("field"):
                raise ValueError(f"papers.json row {k}: ours needs job and field")
            if better(row) is None:
                raise ValueError(f"papers.json row {k}: a {row['unit']!r} figure needs \"better\": lower or higher")
        if row.get("better") not in (None, *BETTER):
            raise ValueError(f"papers.json row {k}: better must be one of {BETTER}")
        if quoted_number(shown_quote(row["quote"])) != float(row["value"]):
            raise ValueError(f"papers.json row {k}: the quote as shown, {shown_quote(row['quote'])!r}, lost its number")


def better(row: dict) -> str | None:
    """Which way the row's figure is better: ``row["better"]``, else lower for a time or a size."""
    if row.get("better"):
        return row["better"]
    return "lower" if UNITS[row["unit"]][0] in ("time", "bytes") else None


def verdict(row: dict, ratio: float | None) -> dict | None:
    """How ours (``ratio`` = ours ÷ paper) compares, in words a reader needs no header for: ``{"class": better |
    worse | same, "words": "ours faster" …}``; within 5 % is "about the same"."""
    direction = better(row)
    if ratio is None or direction is None or ratio <= 0:
        return None
    kind = UNITS[row["unit"]][0]
    good, bad = {"time": ("faster", "slower"), "bytes": ("smaller", "larger")}.get(kind, ("better", "worse"))
    if 1 / 1.05 <= ratio <= 1.05:
        return {"class": "same", "words": "about the same"}
    ours_better = (ratio < 1) == (direction == "lower")
    return {"class": "better" if ours_better else "worse", "words": f"ours {good if ours_better else bad}"}


#: LaTeX in the text copies (math mode of the OCR of tables and abstracts) → Unicode.
LATEX = {"pm": "±", "times": "×", "sim": "∼", "approx": "≈", "leq": "≤", "geq": "≥", "le": "≤", "ge": "≥",
         "cdot": "·", "mu": "µ", "alpha": "α", "beta": "β", "lambda": "λ", "tau": "τ", "ell": "ℓ", "%": "%"}
_SUPER = str.maketrans("0123456789-+", "⁰¹²³⁴⁵⁶⁷⁸⁹⁻⁺")


def _math(text: str) -> str:
    text = re.sub(r"\\([A-Za-z]+|%)", lambda m: LATEX.get(m.group(1), m.group(1)), text)
    text = re.sub(r"\^\{?([-+]?\d+)\}?", lambda m: m.group(1).translate(_SUPER), text)
    text = re.sub(r"[{}]", "", text)
    text = re.sub(r"\s+", " ", text).strip()
    return re.sub(r"([±∼≈]) (?=\d)", r"\1", re.sub(r" ×", "×", text))


def shown_quote(quote: str) -> str:
    """A quote as the paper prints it, from its text copy (papers.json keeps the copy's characters, which a test
    finds in the copy): LaTeX (``$76 (\\pm 1)$``) as Unicode (76 (±1)), and the OCR damage of seed 003's Tab. 2 undone —
    its mean ± standard deviation cells read "0.063 £ 0.0005s", "48.9 + 0.20s", "198 £+ 0.73s"; "9642%" lost its point
    (``quoted_number``)."""
    text = re.sub(r"\$([^$]*)\$", lambda m: _math(m.group(1)), quote)
    text = re.sub(r"(\d)\s*(?:£\+|\+£|=\+|£|\+)\s*(\d[\d.,]*)\s*s\b", r"\1 ± \2 s", text)
    text = text.replace("£", "±")
    m = _NUMBER.search(text)
    if m and len(m.group()) == 4 and m.group().isdigit() and text.strip().endswith("%"):  # as quoted_number
        text = f"{text[:m.start() + 2]}.{text[m.start() + 2:]}"
    return re.sub(r"\(\s+", "(", re.sub(r"\s+\)", ")", text))


_NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?")


def quoted_number(quote: str) -> float:
    """The first number of a quote as printed ("1,082" → 1082, "0.063 ± 0.0005s" → 0.063, "9642%" → 96.42 —
    the text copy of seed 003 lost some decimal points, the quote keeps what the copy shows)."""
    m = _NUMBER.search(quote)
    if m is None:
        raise ValueError(f"no number in {quote!r}")
    text = m.group().replace(",", "")
    if "." not in text and quote.strip().endswith("%") and len(text) == 4:  # "9642%": 96.42 % in the text copy
        return float(text) / 100
    return float(text)


def convert(value: float, unit: str, to: str) -> float:
    kind, f = UNITS[unit]
    kind_to, f_to = UNITS[to]
    if kind != kind_to:
        raise ValueError(f"cannot convert {unit} to {to}")
    return value * f / f_to


def field(result, path: str):
    """``a/b/c`` into nested dicts; None when absent."""
    for part in path.split("/"):
        if not isinstance(result, dict) or part not in result:
            return None
        result = result[part]
    return result


def resolve(row: dict, results: dict[str, object]) -> dict | None:
    """Our figure for a row, in the paper's unit: {value, job, n, extrapolated_from, setting} or None.

    ``results`` maps job id → result. A row's job is an exact id, or (bench identify) the prefix of ids
    ``<job>.n<N>``, of which the largest N measured is taken; with ``n`` in the row, it is scaled by n / N (every
    identification figure here is linear in the gallery size) and marked extrapolated when N differs."""
    ours = row.get("ours")
    if not ours:
        return None
    job, n_ours = ours["job"], None
    result = results.get(job)
    if result is None:
        sized = [(int(k.rsplit(".n", 1)[1]), k) for k, v in results.items()
                 if v is not None and k.startswith(job + ".n") and k.rsplit(".n", 1)[1].isdigit()]
        if not sized:
            return None
        n_ours, job = max(sized)
        result = results[job]
    if isinstance(result, list):  # bench kolberg: rows, one per (scheme, dim)
        sel = ours.get("select", {})
        result = next((r for r in result if all(r.get(k) == v for k, v in sel.items())), None)
    value = field(result, ours["field"])
    if not isinstance(value, int | float) or isinstance(value, bool):
        return None
    value = convert(float(value), ours["unit"], row["unit"])
    out = {"value": value, "job": job, "field": ours["field"], "n": n_ours, "extrapolated_from": None,
           "scaled_by": None}
    if ours.get("n") and n_ours and n_ours != ours["n"]:
        factor, how = scale_factor(result, n_ours, ours["n"])
        out["value"] = value * factor
        out["extrapolated_from"], out["scaled_by"] = n_ours, how
    return out


def scale_factor(result: dict, n_ours: int, n_paper: int) -> tuple[float, str]:
    """How a `bench identify` figure at gallery size n_ours grows to n_paper: by whole blocks (hers, idface: time,
    storage and enrolment are per block of ``templates_per_block``) or ciphertexts (cryptomask: δ templates each),
    else linearly in N."""
    for count, per in (("blocks", "templates_per_block"), ("ciphertexts", "templates_per_ciphertext")):
        if result.get(count) and result.get(per):
            need = -(-n_paper // int(result[per]))
            return need / int(result[count]), f"{count}: {result[count]} → {need} of {result[per]} templates"
    return n_paper / n_ours, "linearly in N"
