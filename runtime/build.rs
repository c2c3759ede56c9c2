//! Gives this build of the runtime an identity that `tapc` can check: the staticlib exports a
//! symbol named after it, and the rlib `tapc` links knows the name, so `tapc` links programs
//! against the very runtime it was built with (not the newest one a shared target directory
//! holds, which may have been built with other features, e.g. `mpi`, or an older copy that
//! `cargo build` left next to the executable before the sources changed: the identity hashes
//! the sources too).
use std::hash::{Hash, Hasher};

fn main() {
    // OUT_DIR is unique per package, profile, target and feature set.
    let out = std::env::var("OUT_DIR").expect("cargo sets OUT_DIR");
    let mut h = std::collections::hash_map::DefaultHasher::new();
    out.hash(&mut h);
    std::env::var("CARGO_CFG_FEATURE")
        .unwrap_or_default()
        .hash(&mut h);
    hash_tree(std::path::Path::new("src"), &mut h);
    let id = format!("{:016X}", h.finish());
    let code = format!(
        "/// This build's identity (see build.rs).\npub const BUILD_ID: &str = \"{id}\";\n\
         /// The symbol the staticlib exports under [`BUILD_ID`]'s name, for `tapc` to find.\n\
         #[no_mangle]\npub static TAPC_RUNTIME_BUILD_{id}: u8 = 0;\n"
    );
    std::fs::write(std::path::Path::new(&out).join("build_id.rs"), code)
        .expect("write build_id.rs");
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=src");
}

/// Hashes every file under `dir` (names and contents, in name order).
fn hash_tree(dir: &std::path::Path, h: &mut impl Hasher) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut paths: Vec<_> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    paths.sort();
    for p in paths {
        p.hash(h);
        if p.is_dir() {
            hash_tree(&p, h);
        } else if let Ok(bytes) = std::fs::read(&p) {
            bytes.hash(h);
        }
    }
}
