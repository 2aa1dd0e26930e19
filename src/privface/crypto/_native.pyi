# Types of the Rust extension privface.crypto._native (crate native/); keep in step with native/src.

SOURCE_HASH: str

# garble.rs
class Circuit:
    def __init__(self, n_wires: int, gates: list[tuple[int, int, int, int]], garbler_inputs: list[int],
                 evaluator_inputs: list[int], constants: list[int], outputs: list[int]) -> None: ...
    @property
    def and_count(self) -> int: ...
    @property
    def half_count(self) -> int: ...

def garble_circuit(circuit: Circuit, garbler_bits: bytes, r: bytes, input_zero: bytes,
                   key: bytes) -> tuple[bytes, bytes, bytes]: ...
def evaluate_circuit(circuit: Circuit, key: bytes, tables: bytes, half_tables: bytes, fixed: bytes,
                     own: bytes) -> bytes: ...
