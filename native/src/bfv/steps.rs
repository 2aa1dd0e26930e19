//! Where Alg. 2's distances spend their time at the CS (seed 001 §4.3 with PackLWEs, `pack`): thread-seconds per
//! step, summed over every `packed_distances` call and thread of this process since the last `take`. A diagnostic
//! for `privface bench identify` (one identification at a time there); concurrent identifications add into the
//! same totals.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// The steps: the products with the query rows (multiply-accumulate, NTT form), their inverse NTTs, the drop from
/// Q to q₀q₁ with the factor −d^{-1}·X^{N−d+1}, PackLWEs' merges (all of it), the NTTs inside its key switches,
/// and the finish (u·Z + e, switch to 2^w).
pub const NAMES: [&str; 6] = ["products_mac", "products_intt", "drop", "pack", "pack_ntt", "finish"];
pub const MAC: usize = 0;
pub const INTT: usize = 1;
pub const DROP: usize = 2;
pub const PACK: usize = 3;
pub const PACK_NTT: usize = 4;
pub const FINISH: usize = 5;

static NANOS: [AtomicU64; 6] = [const { AtomicU64::new(0) }; 6];

/// Adds the time since `t` to `step`.
#[inline(always)]
pub fn add(step: usize, t: Instant) {
    NANOS[step].fetch_add(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
}

/// The totals in seconds (in `NAMES` order), reset to zero. `MAC` is recorded around the whole products call,
/// whose inverse NTTs `INTT` also records: they are taken out here.
pub fn take() -> [f64; 6] {
    let mut s: [f64; 6] = std::array::from_fn(|i| NANOS[i].swap(0, Ordering::Relaxed) as f64 * 1e-9);
    s[MAC] = (s[MAC] - s[INTT]).max(0.0);
    s
}
