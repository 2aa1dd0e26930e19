//! The thread-count knob: every parallel BFV operation, and every parallel IKNP or millionaires' step
//! (`otext`, `millionaire`), runs on this rayon pool (default: rayon's global pool, one thread per core or
//! RAYON_NUM_THREADS; `set_threads(1)` gives the single-threaded setting of seed 001 §5).

use std::sync::{Arc, RwLock};

use rayon::{ThreadPool, ThreadPoolBuilder};

static POOL: RwLock<Option<Arc<ThreadPool>>> = RwLock::new(None);

/// Use `n` threads from now on (0: back to rayon's global pool).
pub fn set_threads(n: usize) -> Result<(), String> {
    let pool = if n == 0 {
        None
    } else {
        Some(Arc::new(
            ThreadPoolBuilder::new()
                .num_threads(n)
                .build()
                .map_err(|e| e.to_string())?,
        ))
    };
    *POOL.write().map_err(|_| "thread pool lock poisoned".to_string())? = pool;
    Ok(())
}

pub fn threads() -> usize {
    match POOL.read().ok().and_then(|g| g.clone()) {
        Some(p) => p.current_num_threads(),
        None => rayon::current_num_threads(),
    }
}

/// Run `f` on the configured pool.
pub fn install<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    let pool = POOL.read().ok().and_then(|g| g.clone());
    match pool {
        Some(p) => p.install(f),
        None => f(),
    }
}
