//! What a pass sees besides the module: [`PassContext`]. It owns the module's verification
//! facts (one [`GraphFacts`] per graph) and re-derives them when a pass says it changed a graph,
//! as Cranelift's `Context` clears its stale analyses; passes take facts from it and never call
//! the verifier themselves. It also holds the text reports analyses leave for `--emit` and the
//! files passes ask the driver to write (passes do no I/O).
//!
//! Staleness is per graph: passes rewrite one graph at a time and only append ops, so a change
//! to one graph leaves the facts of the others true.

use crate::diag::{Diagnostic, Diagnostics};
use crate::ir::Module;
use crate::verify::{self, GraphFacts};
use std::path::PathBuf;

/// The facts, reports and files of a pipeline run (see the module doc).
#[derive(Default)]
pub struct PassContext {
    facts: Vec<GraphFacts>,
    /// Per graph: its facts no longer describe it.
    stale: Vec<bool>,
    pub reports: Vec<(String, String)>,
    /// Files a pass asks for (path, contents), e.g. the cost pass's frontier plot; the driver
    /// writes them after the pipeline succeeds.
    pub files: Vec<(PathBuf, String)>,
}

/// What a pipeline leaves: the facts of the final module, the reports and the files to write.
pub struct PipelineOutput {
    pub facts: Vec<GraphFacts>,
    pub reports: Vec<(String, String)>,
    pub files: Vec<(PathBuf, String)>,
}

impl PipelineOutput {
    /// The last report named `name`.
    pub fn report(&self, name: &str) -> Option<&str> {
        self.reports
            .iter()
            .rev()
            .find(|r| r.0 == name)
            .map(|r| r.1.as_str())
    }
}

/// The first error of `diags`, if any.
fn first_error(diags: Diagnostics) -> Result<(), Diagnostic> {
    match diags.0.into_iter().find(Diagnostic::is_error) {
        Some(d) => Err(d),
        None => Ok(()),
    }
}

impl PassContext {
    /// A context for a module whose facts are `facts` (fresh: it was just verified).
    pub fn new(facts: Vec<GraphFacts>) -> PassContext {
        PassContext {
            stale: vec![false; facts.len()],
            facts,
            ..PassContext::default()
        }
    }

    /// The facts of every graph of `m`, re-derived for the graphs a pass changed since they
    /// were last derived. A graph that no longer verifies is its first error.
    pub fn facts(&mut self, m: &mut Module) -> Result<&[GraphFacts], Diagnostic> {
        if self.facts.len() != m.graphs.len() {
            self.refresh(m)?;
        }
        for gi in 0..m.graphs.len() {
            if self.stale[gi] {
                let (diags, facts) = verify::verify_one(m, gi);
                first_error(diags)?;
                self.facts[gi] = facts;
                self.stale[gi] = false;
            }
        }
        Ok(&self.facts)
    }

    /// The facts of `m` (as [`PassContext::facts`]), moved out for a pass that consumes them;
    /// the context re-derives them when asked again.
    pub fn take_facts(&mut self, m: &mut Module) -> Result<Vec<GraphFacts>, Diagnostic> {
        self.facts(m)?;
        self.stale.clear();
        Ok(std::mem::take(&mut self.facts))
    }

    /// Says that the pass changed graph `gi`: its facts are re-derived when next asked for.
    pub fn invalidate(&mut self, gi: usize) {
        if let Some(s) = self.stale.get_mut(gi) {
            *s = true;
        }
    }

    /// Verifies all of `m` and keeps its facts (the manager's verify after every pass). The
    /// module's first error, if it does not verify.
    pub fn refresh(&mut self, m: &mut Module) -> Result<(), Diagnostic> {
        let (diags, facts) = verify::verify(m);
        self.facts.clear();
        self.stale.clear();
        first_error(diags)?;
        self.stale = vec![false; facts.len()];
        self.facts = facts;
        Ok(())
    }

    /// The facts (fresh after the manager's last verify), reports and files of the run.
    pub fn finish(self) -> PipelineOutput {
        PipelineOutput {
            facts: self.facts,
            reports: self.reports,
            files: self.files,
        }
    }
}
