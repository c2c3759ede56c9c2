//! tapc: a compiler for the Tapestry Expression Graph (TEG).
//!
//! Pipeline: [`syntax`] (text → syntax tree), [`lower`] (syntax tree → IR), [`verify`] (types,
//! shapes, bounds; produces per-apply [`ir::instance::Instance`]s), [`passes`] (graph rewrites,
//! run by the pass manager), [`interp`] (the reference interpreter: the oracle of what a graph
//! means), [`codegen`] (the native backend), [`print`] (IR → text), [`format`] (`tapc fmt`: canonical text that keeps
//! comments), [`driver`] (the `tapc`
//! command line), [`embed`] (compile once, run many times on caller memory: the Python
//! package's core) and [`lsp`] (the language server). See docs/architecture.md for the layers,
//! the invariants and the API boundaries between these parts.

pub mod codegen;
pub mod diag;
pub mod driver;
pub mod embed;
pub mod format;
pub mod import;
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
    let a = analyse_source(src);
    (a.module, a.facts, a.diags)
}

/// [`compile_source`]'s result plus every graph with errors, verified as far as its errors
/// allow (what they do not touch is typed, and each apply that checked has its instance), for
/// the language server: hover and inlay hints keep working on a file with errors.
pub struct Analysis {
    pub module: ir::Module,
    pub facts: Vec<verify::GraphFacts>,
    pub diags: Diagnostics,
    pub broken: Vec<(ir::graph::Graph, verify::GraphFacts)>,
}

/// See [`Analysis`].
pub fn analyse_source(src: &str) -> Analysis {
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
    let (vd, all_facts) =
        verify::verify_with(&mut lowered.module, &lowered.arg_spans, &lowered.stubs);
    diags.extend(vd);
    let mut module = lowered.module;
    let graphs = std::mem::take(&mut module.graphs);
    let mut facts = Vec::new();
    let mut broken = Vec::new();
    let flags = lowered
        .broken
        .iter()
        .copied()
        .chain(std::iter::repeat(false));
    for ((g, f), is_broken) in graphs.into_iter().zip(all_facts).zip(flags) {
        if is_broken {
            broken.push((g, f));
        } else {
            module.graphs.push(g);
            facts.push(f);
        }
    }
    Analysis {
        module,
        facts,
        diags: diags.deduplicated().sorted(),
        broken,
    }
}
