//! tapc: a compiler for the Tapestry Expression Graph (TEG).
//!
//! Pipeline: [`syntax`] (text → syntax tree), [`lower`] (syntax tree → IR), [`verify`] (types,
//! shapes, bounds; produces per-apply [`ir::instance::Instance`]s), [`passes`] (graph rewrites,
//! run by the pass manager), [`interp`] (the reference interpreter: the oracle of what a graph
//! means), [`codegen`] (the native backend), [`print`] (IR → text), [`format`] (`tapc fmt`: canonical text that keeps
//! comments), [`driver`] (the `tapc`
//! command line) and [`lsp`] (the language server). See docs/architecture.md for the layers,
//! the invariants and the API boundaries between these parts.

pub mod codegen;
pub mod diag;
pub mod driver;
pub mod format;
pub mod interp;
pub mod ir;
pub mod lower;
pub mod lsp;
pub mod print;
pub mod syntax;
pub mod verify;

#[path = "../passes/mod.rs"]
pub mod passes;

use diag::Diagnostics;

/// Parses, lowers and verifies `src`: the module plus every diagnostic, sorted by position.
/// The module holds only the items that lowered cleanly; check `diags.has_errors()`.
pub fn compile_source(src: &str) -> (ir::Module, Vec<verify::GraphFacts>, Diagnostics) {
    let mut diags = Diagnostics::default();
    let file = syntax::parse(src, &mut diags);
    let mut lowered = lower::lower_all(&file, &mut diags);
    // Ops first, once each: an op's own mistakes are then reported once, applied or not.
    let with_errors = lowered.stubs.iter().filter_map(|s| s.kernel.as_ref());
    diags.extend(verify::check_ops(
        lowered.module.ops.iter().chain(with_errors),
    ));
    // Graphs with lowering errors are verified too (their bad statements are poisoned), so
    // one mistake never hides another; they are left out of the module afterwards.
    let (vd, mut facts) =
        verify::verify_with(&mut lowered.module, &lowered.arg_spans, &lowered.stubs);
    diags.extend(vd);
    let mut broken = lowered.broken.iter();
    facts.retain(|_| !broken.next().copied().unwrap_or(false));
    let module = lowered.into_clean();
    (module, facts, diags.deduplicated().sorted())
}
