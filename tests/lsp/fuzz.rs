//! A CI slice of the LSP fuzzer (`tests/fuzzing/lsp.rs`; the full run is the `lsp` stage of
//! `cargo bench --bench fuzz`): framing, JSON shape and positions, the server in-process.

use crate::lsp_fuzz;

#[test]
fn lsp_fuzz_slice_finds_nothing() {
    let mut all = lsp_fuzz::Outcome::default();
    let mut findings = Vec::new();
    for k in 0..40u64 {
        match lsp_fuzz::run(0x15b_f022 + k * 0x9e37_79b9, 100) {
            Ok(o) => all += o,
            Err(e) => findings.push(e),
        }
    }
    eprintln!("lsp fuzz: {all:?}, {} findings", findings.len());
    assert!(findings.is_empty(), "{findings:#?}");
    assert!(all.cases >= 4000, "{all:?}");
    // The cases reach the handlers and the error paths alike.
    assert!(
        all.results >= 400 && all.errors >= 400 && all.logged >= 200,
        "{all:?}"
    );
}
