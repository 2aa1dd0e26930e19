//! Half-gates garbling and evaluation: free-XOR (Kolesnikov–Schneider 2008), point-and-permute and
//! half-gates (Zahur–Rosulek–Evans, "Two halves make a whole", EUROCRYPT 2015, Fig. 2; generator
//! half-gates for garbler-known inputs, §3.1), with the fixed-key hash H(x, j) = π(σ(x) ⊕ j) ⊕ σ(x),
//! π = AES-128, σ(x) = 2·x in GF(2^128) — the same wire bytes as the circuits of
//! privface/crypto/garble.py, which builds the circuits, draws the randomness and checks the messages.
//!
//! Labels are u128 read little-endian from their 16 bytes. Written here by hand: no maintained crate
//! garbles privface's circuit format with this hash.

use aes::Aes128;
use aes::cipher::generic_array::GenericArray;
use aes::cipher::{BlockEncrypt, KeyInit};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

/// Tweaks of generator half-gates: HALF_TWEAK + h, never equal to an AND gate's 2t or 2t + 1.
pub const HALF_TWEAK: u128 = 1 << 96;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Xor,
    And,
    Inv,
    /// a ∧ b with a a garbler input wire (generator half-gate, one table).
    GAnd,
}

#[derive(Clone, Copy, Debug)]
pub struct Gate {
    pub op: Op,
    pub a: usize,
    pub b: usize,
    pub out: usize,
}

/// A topologically ordered circuit, checked on construction (wire numbers in range, GAND's first
/// input a garbler input).
#[derive(Debug)]
pub struct Circuit {
    pub n_wires: usize,
    pub gates: Vec<Gate>,
    pub garbler_inputs: Vec<usize>,
    pub evaluator_inputs: Vec<usize>,
    pub constants: Vec<usize>,
    pub outputs: Vec<usize>,
    pub and_count: usize,
    pub half_count: usize,
    /// For GAND gates: the index of wire a among the garbler inputs.
    garbler_index: Vec<Option<usize>>,
}

impl Circuit {
    /// `gates`: (op, a, b, out) with op 0 XOR, 1 AND, 2 INV, 3 GAND (the order of garble.py's OPS) and
    /// b = -1 for INV.
    pub fn new(
        n_wires: usize,
        gates: &[(u8, i64, i64, i64)],
        garbler_inputs: Vec<usize>,
        evaluator_inputs: Vec<usize>,
        constants: Vec<usize>,
        outputs: Vec<usize>,
    ) -> Result<Circuit, String> {
        let wire = |w: i64, what: &str| -> Result<usize, String> {
            usize::try_from(w)
                .ok()
                .filter(|&w| w < n_wires)
                .ok_or_else(|| format!("circuit: {what} wire {w} outside 0..{n_wires}"))
        };
        let mut garbler_index = vec![None; n_wires];
        for (i, &w) in garbler_inputs.iter().enumerate() {
            garbler_index[wire(w as i64, "garbler input")?] = Some(i);
        }
        for &w in evaluator_inputs.iter().chain(&constants).chain(&outputs) {
            wire(w as i64, "input or output")?;
        }
        let mut out = Vec::with_capacity(gates.len());
        let (mut and_count, mut half_count) = (0, 0);
        for &(op, a, b, o) in gates {
            let op = match op {
                0 => Op::Xor,
                1 => Op::And,
                2 => Op::Inv,
                3 => Op::GAnd,
                _ => return Err(format!("circuit: unknown gate op {op}")),
            };
            let a = wire(a, "gate input")?;
            let b = if op == Op::Inv { 0 } else { wire(b, "gate input")? };
            match op {
                Op::And => and_count += 1,
                Op::GAnd => {
                    if garbler_index[a].is_none() {
                        return Err("circuit: a GAND gate's first input must be a garbler input".into());
                    }
                    half_count += 1
                }
                _ => {}
            }
            out.push(Gate {
                op,
                a,
                b,
                out: wire(o, "gate output")?,
            });
        }
        Ok(Circuit {
            n_wires,
            gates: out,
            garbler_inputs,
            evaluator_inputs,
            constants,
            outputs,
            and_count,
            half_count,
            garbler_index,
        })
    }
}

#[inline]
fn sigma(x: u128) -> u128 {
    (x << 1) ^ if x >> 127 != 0 { 0x87 } else { 0 }
}

/// H(x_i, j_i) = π(σ(x_i) ⊕ j_i) ⊕ σ(x_i) for N blocks given s_i = σ(x_i), in one batched AES call.
#[inline]
fn hash<const N: usize>(aes: &Aes128, sig: [u128; N], tweaks: [u128; N]) -> [u128; N] {
    let mut blocks = [GenericArray::default(); N];
    for i in 0..N {
        blocks[i].copy_from_slice(&(sig[i] ^ tweaks[i]).to_le_bytes());
    }
    aes.encrypt_blocks(&mut blocks);
    let mut out = [0u128; N];
    for i in 0..N {
        out[i] = u128::from_le_bytes(blocks[i].into()) ^ sig[i];
    }
    out
}

fn read_label(data: &[u8], i: usize) -> u128 {
    u128::from_le_bytes(data[16 * i..16 * i + 16].try_into().expect("16 bytes"))
}

/// What one garbling produces: the AND tables (T_G ‖ T_E per gate), the half-gate tables and every
/// wire's 0-label.
pub struct Garbled {
    pub tables: Vec<u8>,
    pub half_tables: Vec<u8>,
    pub zero: Vec<u128>,
}

/// Garble with offset R (lsb 1), the inputs' 0-labels (garbler inputs, evaluator inputs, constants, in
/// that order), the garbler's input bits (read by generator half-gates only) and the AES key.
pub fn garble(
    c: &Circuit,
    garbler_bits: &[u8],
    r: u128,
    input_zero: &[u128],
    key: [u8; 16],
) -> Result<Garbled, String> {
    let inputs = c.garbler_inputs.iter().chain(&c.evaluator_inputs).chain(&c.constants);
    if input_zero.len() != c.garbler_inputs.len() + c.evaluator_inputs.len() + c.constants.len() {
        return Err("garble: one 0-label per input wire expected".into());
    }
    if r & 1 != 1 {
        return Err("garble: R must have lsb 1".into());
    }
    if c.half_count > 0 && garbler_bits.len() != c.garbler_inputs.len() {
        return Err("garble: a circuit with generator half-gates needs the garbler's input bits".into());
    }
    let mut zero = vec![0u128; c.n_wires];
    for (&w, &z) in inputs.zip(input_zero) {
        zero[w] = z;
    }
    let aes = Aes128::new(&key.into());
    let mut tables = Vec::with_capacity(32 * c.and_count);
    let mut half_tables = Vec::with_capacity(16 * c.half_count);
    let s_r = sigma(r); // σ is linear: σ(A ⊕ R) = σ(A) ⊕ σ(R)
    let mut j: u128 = 0;
    let mut h: u128 = 0;
    for g in &c.gates {
        zero[g.out] = match g.op {
            Op::Xor => zero[g.a] ^ zero[g.b],
            Op::Inv => zero[g.a] ^ r,
            Op::GAnd => {
                let b0 = zero[g.b];
                let s_b = sigma(b0);
                let t = HALF_TWEAK + h;
                let [hb0, hb1] = hash(&aes, [s_b, s_b ^ s_r], [t, t]);
                let known = garbler_bits[c.garbler_index[g.a].expect("checked in Circuit::new")] & 1 == 1;
                let tt = hb0 ^ hb1 ^ if known { r } else { 0 };
                half_tables.extend_from_slice(&tt.to_le_bytes());
                h += 1;
                hb0 ^ if b0 & 1 == 1 { tt } else { 0 }
            }
            Op::And => {
                let (a0, b0) = (zero[g.a], zero[g.b]);
                let (pa, pb) = (a0 & 1 == 1, b0 & 1 == 1);
                let (s_a, s_b) = (sigma(a0), sigma(b0));
                let [ha0, ha1, hb0, hb1] = hash(&aes, [s_a, s_a ^ s_r, s_b, s_b ^ s_r], [j, j, j + 1, j + 1]);
                let tg = ha0 ^ ha1 ^ if pb { r } else { 0 }; // generator half: a ∧ p_b
                let wg = ha0 ^ if pa { tg } else { 0 };
                let te = hb0 ^ hb1 ^ a0; // evaluator half: a ∧ (b ⊕ p_b)
                let we = hb0 ^ if pb { te ^ a0 } else { 0 };
                tables.extend_from_slice(&tg.to_le_bytes());
                tables.extend_from_slice(&te.to_le_bytes());
                j += 2;
                wg ^ we
            }
        };
    }
    Ok(Garbled {
        tables,
        half_tables,
        zero,
    })
}

/// Evaluate on the active labels of the garbler inputs and constants (`fixed`) and of the evaluator
/// inputs; returns the output labels.
pub fn evaluate(
    c: &Circuit,
    key: [u8; 16],
    tables: &[u8],
    half_tables: &[u8],
    fixed: &[u128],
    own: &[u128],
) -> Result<Vec<u128>, String> {
    if tables.len() != 32 * c.and_count || half_tables.len() != 16 * c.half_count {
        return Err(format!(
            "garbled circuit: {} AND tables and {} half-gate tables expected",
            c.and_count, c.half_count
        ));
    }
    if fixed.len() != c.garbler_inputs.len() + c.constants.len() || own.len() != c.evaluator_inputs.len() {
        return Err("garbled circuit: wrong number of input labels".into());
    }
    let mut w = vec![0u128; c.n_wires];
    for (&wire, &label) in c
        .garbler_inputs
        .iter()
        .chain(&c.constants)
        .chain(&c.evaluator_inputs)
        .zip(fixed.iter().chain(own))
    {
        w[wire] = label;
    }
    let aes = Aes128::new(&key.into());
    let (mut t, mut hi) = (0usize, 0usize);
    for g in &c.gates {
        w[g.out] = match g.op {
            Op::Xor => w[g.a] ^ w[g.b],
            Op::Inv => w[g.a], // the garbler flipped the meaning (0-label ⊕ R)
            Op::GAnd => {
                let wb = w[g.b];
                let [hb] = hash(&aes, [sigma(wb)], [HALF_TWEAK + hi as u128]);
                let out = hb ^ if wb & 1 == 1 { read_label(half_tables, hi) } else { 0 };
                hi += 1;
                out
            }
            Op::And => {
                let (wa, wb) = (w[g.a], w[g.b]);
                let j = 2 * t as u128;
                let [ha, hb] = hash(&aes, [sigma(wa), sigma(wb)], [j, j + 1]);
                let tg = if wa & 1 == 1 { read_label(tables, 2 * t) } else { 0 };
                let te = if wb & 1 == 1 {
                    read_label(tables, 2 * t + 1) ^ wa
                } else {
                    0
                };
                t += 1;
                ha ^ tg ^ hb ^ te
            }
        };
    }
    Ok(c.outputs.iter().map(|&o| w[o]).collect())
}

// --- Python bindings ---------------------------------------------------------------------------

/// A circuit handed over once (garble.py caches it per Circuit): gates as (op, a, b, out) tuples.
#[pyclass(frozen, name = "Circuit", module = "privface.crypto._native")]
pub struct PyCircuit {
    inner: Circuit,
}

#[pymethods]
impl PyCircuit {
    #[new]
    fn py_new(
        n_wires: usize,
        gates: Vec<(u8, i64, i64, i64)>,
        garbler_inputs: Vec<usize>,
        evaluator_inputs: Vec<usize>,
        constants: Vec<usize>,
        outputs: Vec<usize>,
    ) -> PyResult<Self> {
        Circuit::new(n_wires, &gates, garbler_inputs, evaluator_inputs, constants, outputs)
            .map(|inner| PyCircuit { inner })
            .map_err(PyValueError::new_err)
    }

    #[getter]
    fn and_count(&self) -> usize {
        self.inner.and_count
    }

    #[getter]
    fn half_count(&self) -> usize {
        self.inner.half_count
    }
}

fn labels(data: &[u8], what: &str) -> PyResult<Vec<u128>> {
    if !data.len().is_multiple_of(16) {
        return Err(PyValueError::new_err(format!(
            "{what}: not a whole number of 16-byte labels"
        )));
    }
    Ok((0..data.len() / 16).map(|i| read_label(data, i)).collect())
}

fn key16(key: &[u8]) -> PyResult<[u8; 16]> {
    key.try_into()
        .map_err(|_| PyValueError::new_err("garbling key must be 16 bytes"))
}

fn to_bytes(labels: &[u128]) -> Vec<u8> {
    labels.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// garble(circuit, garbler_bits, R, input_zero, key) → (tables, half_tables, zero labels of all wires),
/// all as bytes (16 bytes per label, little-endian).
#[pyfunction]
fn garble_circuit<'py>(
    py: Python<'py>,
    circuit: &Bound<'py, PyCircuit>,
    garbler_bits: &[u8],
    r: &[u8],
    input_zero: &[u8],
    key: &[u8],
) -> PyResult<(Bound<'py, PyBytes>, Bound<'py, PyBytes>, Bound<'py, PyBytes>)> {
    let c = &circuit.get().inner;
    let r = u128::from_le_bytes(r.try_into().map_err(|_| PyValueError::new_err("R must be 16 bytes"))?);
    let input_zero = labels(input_zero, "input labels")?;
    let key = key16(key)?;
    let g = py
        .detach(|| garble(c, garbler_bits, r, &input_zero, key).map(|g| (g.tables, g.half_tables, to_bytes(&g.zero))))
        .map_err(PyValueError::new_err)?;
    Ok((PyBytes::new(py, &g.0), PyBytes::new(py, &g.1), PyBytes::new(py, &g.2)))
}

/// evaluate(circuit, key, tables, half_tables, fixed_labels, evaluator_labels) → output labels (bytes).
#[pyfunction]
fn evaluate_circuit<'py>(
    py: Python<'py>,
    circuit: &Bound<'py, PyCircuit>,
    key: &[u8],
    tables: &[u8],
    half_tables: &[u8],
    fixed: &[u8],
    own: &[u8],
) -> PyResult<Bound<'py, PyBytes>> {
    let c = &circuit.get().inner;
    let key = key16(key)?;
    let (fixed, own) = (labels(fixed, "garbler labels")?, labels(own, "evaluator labels")?);
    let out = py
        .detach(|| evaluate(c, key, tables, half_tables, &fixed, &own).map(|o| to_bytes(&o)))
        .map_err(PyValueError::new_err)?;
    Ok(PyBytes::new(py, &out))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyCircuit>()?;
    m.add_function(wrap_pyfunction!(garble_circuit, m)?)?;
    m.add_function(wrap_pyfunction!(evaluate_circuit, m)?)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// [x < t] style check on a tiny circuit: x AND y, x XOR y, NOT x, GAND(g, x).
    fn small() -> Circuit {
        // wires: 0 garbler g, 1 evaluator x, 2 evaluator y; gates → 3..6
        let gates = [(1, 1, 2, 3), (0, 1, 2, 4), (2, 1, -1, 5), (3, 0, 1, 6)];
        Circuit::new(7, &gates, vec![0], vec![1, 2], vec![], vec![3, 4, 5, 6]).unwrap()
    }

    #[test]
    fn garbled_evaluation_decodes_to_the_plain_values() {
        let c = small();
        let key = [7u8; 16];
        let r = 0x1234_5678_9abc_def0_0fed_cba9_8765_4321u128 | 1;
        for bits in 0..8u8 {
            let (g, x, y) = (bits & 1, (bits >> 1) & 1, (bits >> 2) & 1);
            let zi = [11u128 << 64 | 5, 22u128 << 70 | 9, 33u128 << 90 | 2];
            let gb = garble(&c, &[g], r, &zi, key).unwrap();
            let lab = |w: usize, b: u8| gb.zero[w] ^ if b == 1 { r } else { 0 };
            let out = evaluate(
                &c,
                key,
                &gb.tables,
                &gb.half_tables,
                &[lab(0, g)],
                &[lab(1, x), lab(2, y)],
            )
            .unwrap();
            let want = [x & y, x ^ y, x ^ 1, g & x];
            for (o, (&w, &b)) in out.iter().zip(c.outputs.iter().zip(&want)) {
                assert_eq!(*o, lab(w, b), "bits g={g} x={x} y={y} wire {w}");
            }
        }
    }

    #[test]
    fn bad_circuits_are_refused() {
        assert!(Circuit::new(3, &[(1, 0, 5, 2)], vec![0], vec![1], vec![], vec![2]).is_err());
        assert!(Circuit::new(3, &[(9, 0, 1, 2)], vec![0], vec![1], vec![], vec![2]).is_err());
        assert!(Circuit::new(3, &[(3, 1, 0, 2)], vec![0], vec![1], vec![], vec![2]).is_err()); // GAND on evaluator wire
        assert!(Circuit::new(3, &[(0, 0, 1, -1)], vec![0], vec![1], vec![], vec![2]).is_err());
    }

    #[test]
    fn sigma_is_doubling_in_gf2_128() {
        assert_eq!(sigma(1), 2);
        assert_eq!(sigma(1 << 127), 0x87);
        assert_eq!(sigma(3 << 126), (1 << 127) ^ 0x87);
    }
}
