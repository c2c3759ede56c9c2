//! Runs of several steps (`--steps N`, docs/teg.md §8 and §14): a graph with state is applied
//! `N` times, each `state @w` taking the value its `update @w` had in the step before, in
//! memory (no file is written between steps). The sinks of the last step, the updates among
//! them, are the outputs. `--log-every K` prints the one-element sinks (not the updates) of
//! every `K`-th step as CSV lines `step,name,value`, on stdout as each step ends ([`StepLog`]),
//! and a run of several steps draws a progress bar on stderr when stderr is a terminal. Every
//! front end (the interpreter, the JIT, compiled programs) counts steps and prints the log lines
//! through this module.

use crate::tensor::Tensor;
use crate::with_data;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::{IsTerminal, Write as _};

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

/// Where a run's log lines go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogTo {
    /// Printed on stdout as each step ends, with a progress bar on stderr if it is a terminal.
    Stdout,
    /// Kept for the caller (a test driving `tapc` in-process, a rank that sends its lines on).
    Kept,
}

/// The log lines of a run of several steps as they are produced, and its progress bar.
pub struct StepLog {
    to: LogTo,
    kept: String,
    bar: Option<indicatif::ProgressBar>,
}

impl StepLog {
    /// A log for a run of `steps`; the bar only for several steps on a terminal's stderr.
    pub fn new(steps: &Steps, to: LogTo) -> StepLog {
        let watched = to == LogTo::Stdout && steps.count > 1 && std::io::stderr().is_terminal();
        let bar = watched.then(|| {
            let b = indicatif::ProgressBar::new(steps.count);
            b.set_draw_target(indicatif::ProgressDrawTarget::stderr());
            let style = "step {pos}/{len} {bar:30} {elapsed_precise} ({eta} left)";
            b.set_style(
                indicatif::ProgressStyle::with_template(style)
                    .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
            );
            b
        });
        StepLog {
            to,
            kept: String::new(),
            bar,
        }
    }

    /// A step has ended with log `lines` (possibly none): print or keep them, advance the bar.
    pub fn step_done(&mut self, lines: &str) {
        match self.to {
            LogTo::Kept => self.kept.push_str(lines),
            LogTo::Stdout if !lines.is_empty() => {
                // A user watching a long run reads each loss as its step ends.
                let print = || {
                    let mut out = std::io::stdout().lock();
                    let _ = out.write_all(lines.as_bytes()).and_then(|()| out.flush());
                };
                match &self.bar {
                    Some(b) => b.suspend(print),
                    None => print(),
                }
            }
            LogTo::Stdout => {}
        }
        if let Some(b) = &self.bar {
            b.inc(1);
        }
    }

    /// Removes the bar and returns the kept lines (none when they went to stdout).
    pub fn finish(&mut self) -> String {
        if let Some(b) = self.bar.take() {
            b.finish_and_clear();
        }
        std::mem::take(&mut self.kept)
    }
}

impl Drop for StepLog {
    /// A failed run's message is printed on a clean line.
    fn drop(&mut self) {
        self.finish();
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
    log: &mut StepLog,
) -> Result<Vec<(String, Tensor)>, E> {
    let mut s = 1;
    loop {
        let sinks = step(inputs)?;
        let shown = sinks.iter().filter(|(n, _)| !states.contains(n));
        let mut lines = String::new();
        log_step(steps, s, shown.map(|(n, t)| (n.as_str(), t)), &mut lines);
        log.step_done(&lines);
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
