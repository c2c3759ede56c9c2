//! The interface between the pass manager and the passes: the [`Pass`] trait, the options a
//! pipeline entry gives a pass, and the input files the driver read for it. It sits apart from
//! `manager.rs` so that the passes and the manager that registers them depend on it, not on
//! each other.

use super::context::PassContext;
use crate::diag::Diagnostic;
use crate::ir::Module;

pub trait Pass {
    fn name(&self) -> &'static str;
    /// Runs on the whole module; returns whether anything changed.
    fn run(&mut self, m: &mut Module, cx: &mut PassContext) -> Result<bool, Diagnostic>;
}

/// `{key=value}` options of one pipeline entry.
pub type PassOptions = [(String, String)];

/// Builds a pass from its options and the input files they name (or says why not).
pub type CreatePass = fn(&PassOptions, &PassFiles) -> Result<Box<dyn Pass>, String>;

/// The contents of the input files that pass options name (`cost{machine=FILE}`), by path as
/// written. The driver reads them before the pipeline runs (`manager::input_paths` lists
/// them), since passes do no I/O; a file that could not be read holds the error, which the
/// pass reports when it reads its options, so errors come in the order they always did.
#[derive(Clone, Debug, Default)]
pub struct PassFiles(std::collections::HashMap<String, Result<String, String>>);

impl PassFiles {
    pub fn insert(&mut self, path: String, contents: Result<String, String>) {
        self.0.insert(path, contents);
    }

    /// The contents of `path`, or why it could not be read.
    pub fn get(&self, path: &str) -> Result<&str, String> {
        match self.0.get(path) {
            Some(Ok(text)) => Ok(text),
            Some(Err(e)) => Err(e.clone()),
            None => Err("the driver did not read it".into()),
        }
    }
}
