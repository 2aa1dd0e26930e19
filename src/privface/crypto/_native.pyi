# Types of the Rust extension privface.crypto._native (crate native/); keep in step with native/src.

SOURCE_HASH: str
