//! Embeds PRIVFACE_NATIVE_SOURCE_HASH: SHA-256 over this crate's sources (build.rs, Cargo.toml,
//! Cargo.lock and every file under src/, sorted by path), each as `path \0 length \0 bytes`. The Python
//! wrapper (privface/crypto/native.py) hashes the checkout's sources the same way and refuses a stale build.

use sha2::{Digest, Sha256};
use std::fs;
use std::path::{Path, PathBuf};

fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).expect("read src/") {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            collect(&path, out);
        } else {
            out.push(path);
        }
    }
}

fn main() {
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let mut files = vec![root.join("build.rs"), root.join("Cargo.toml"), root.join("Cargo.lock")];
    collect(&root.join("src"), &mut files);
    let mut named: Vec<(String, PathBuf)> = files
        .into_iter()
        .map(|p| {
            let rel = p
                .strip_prefix(&root)
                .expect("under the crate")
                .to_string_lossy()
                .replace('\\', "/");
            (rel, p)
        })
        .collect();
    named.sort();
    let mut h = Sha256::new();
    for (rel, path) in &named {
        let bytes = fs::read(path).unwrap_or_else(|e| panic!("read {rel}: {e}"));
        h.update(rel.as_bytes());
        h.update(b"\0");
        h.update(bytes.len().to_string().as_bytes());
        h.update(b"\0");
        h.update(&bytes);
        println!("cargo:rerun-if-changed={}", path.display());
    }
    println!("cargo:rerun-if-changed={}", root.join("src").display());
    let hex: String = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
    println!("cargo:rustc-env=PRIVFACE_NATIVE_SOURCE_HASH={hex}");
}
