//! Runs of several steps (`--steps N`, docs/teg.md §8 and §14): a graph with state is applied
//! `N` times, each `state @w` taking the value its `update @w` had in the step before, in
//! memory (no file is written between steps). The sinks of the last step, the updates among
//! them, are the outputs. `--log-every K` prints the one-element sinks (not the updates) of
//! every `K`-th step as CSV lines `step,name,value`. Every front end (the interpreter, the JIT, compiled programs)
//! counts steps and prints the log lines through this module.

use crate::tensor::Tensor;
use crate::with_data;
use std::collections::HashMap;
use std::fmt::Write as _;

/// How many steps to run, and how often to log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Steps {
    /// At least 1.
    pub count: u64,
    /// Log the scalar sinks of the steps that are multiples of this (`None`: never).
    pub log_every: Option<u64>,
}

impl Default for Steps {
    fn default() -> Steps {
        Steps {
            count: 1,
            log_every: None,
        }
    }
}

impl Steps {
    /// Whether step `s` (counted from 1) is logged.
    pub fn logs(&self, s: u64) -> bool {
        self.log_every.is_some_and(|k| s.is_multiple_of(k))
    }
}

/// Parses the value of `--steps` or `--log-every`: an integer of at least 1.
pub fn parse_count(flag: &str, value: &str) -> Result<u64, String> {
    match value.parse::<u64>() {
        Ok(n) if n >= 1 => Ok(n),
        Ok(_) if flag == "--steps" => Err(format!(
            "`--steps {value}`: a run applies the graph at least once (`--steps 1`, the default)"
        )),
        _ => Err(format!("`{flag} {value}` must be a positive integer")),
    }
}

/// The text of a tensor's single element (`None` unless it has exactly one): a float by the
/// shortest text that reads back to it, in its own width.
pub fn scalar_text(t: &Tensor) -> Option<String> {
    if t.len() != 1 {
        return None;
    }
    Some(with_data!(&t.data, v => v[0].to_string()))
}

/// Appends the log lines of step `s` to `log`: one `s,name,value` per one-element sink
/// (`sinks` holds the ordinary sinks, not the updates).
pub fn log_step<'a>(
    steps: &Steps,
    s: u64,
    sinks: impl IntoIterator<Item = (&'a str, &'a Tensor)>,
    log: &mut String,
) {
    if !steps.logs(s) {
        return;
    }
    for (name, t) in sinks {
        if let Some(v) = scalar_text(t) {
            let _ = writeln!(log, "{s},{name},{v}");
        }
    }
}

/// Runs `steps` applications of a graph whose inputs are held by name (`tapc run`): `step`
/// computes the sinks of one application from `inputs`; after each step but the last, every
/// state in `states` (a name both of a source and of its update sink) is bound to its update.
/// Returns the sinks of the last step; the log lines go to `log`.
pub fn run_named<E>(
    steps: &Steps,
    inputs: &mut HashMap<String, Tensor>,
    states: &[String],
    mut step: impl FnMut(&HashMap<String, Tensor>) -> Result<Vec<(String, Tensor)>, E>,
    log: &mut String,
) -> Result<Vec<(String, Tensor)>, E> {
    let mut s = 1;
    loop {
        let sinks = step(inputs)?;
        let shown = sinks.iter().filter(|(n, _)| !states.contains(n));
        log_step(steps, s, shown.map(|(n, t)| (n.as_str(), t)), log);
        if s >= steps.count {
            return Ok(sinks);
        }
        for (name, t) in sinks {
            if states.contains(&name) {
                inputs.insert(name, t);
            }
        }
        s += 1;
    }
}
