//! The pass manager: a registry of passes by name, `--passes=` pipeline parsing
//! (`name`, `name{key=value,...}`), and a runner that re-verifies after every pass (through
//! the [`PassContext`], which owns the facts passes rely on and is refreshed by that verify),
//! prints after passes and times them. Pass failures are diagnostics, never panics.

use crate::diag::{codes, Diagnostic};
use crate::ir::Module;
use crate::print::print_module;
use crate::verify::GraphFacts;
use std::time::{Duration, Instant};

/// The pipeline `tapc input.teg -o out` runs before code generation.
pub const DEFAULT_PIPELINE: &str = "grad,canonicalize";

pub use super::context::{PassContext, PipelineOutput};
pub use super::pass::{CreatePass, Pass, PassFiles, PassOptions};

pub struct PassInfo {
    pub name: &'static str,
    pub summary: &'static str,
    /// The options whose value names an input file (read by the driver, see [`PassFiles`]).
    pub files: &'static [&'static str],
    pub create: CreatePass,
}

/// Every pass, in one place.
pub fn registry() -> &'static [PassInfo] {
    &[
        PassInfo {
            name: "grad",
            summary: "lowers `grad` statements into gradient ops (reverse-mode differentiation)",
            files: &[],
            create: |o, _| super::grad::create(o),
        },
        PassInfo {
            name: "canonicalize",
            summary: "view-chain canonicalization, DCE and CSE",
            files: &[],
            create: |o, _| super::canonicalize::create(o),
        },
        PassInfo {
            name: "shard",
            summary: "split applies into shards along index dimensions (parts, dim, nodes)",
            files: &[],
            create: |o, _| super::shard::create(o),
        },
        PassInfo {
            name: "fuse",
            summary: "producer-consumer fusion of applies and folding of views into affine accesses",
            files: &[],
            create: |o, _| super::fuse::create(o),
        },
        PassInfo {
            name: "cost",
            summary: "cost model and stochastic Pareto search over sharding plans; applies the chosen plan",
            files: &["machine"],
            create: super::cost::create,
        },
        PassInfo {
            name: "alias",
            summary: "footprints of every value on its allocations (stripe/sett/region algebra)",
            files: &[],
            create: |o, _| super::alias::analysis::create(o),
        },
    ]
}

/// One pipeline entry: a pass name and its `{key=value}` options.
#[derive(Debug, PartialEq)]
pub struct PassSpec {
    pub name: String,
    pub options: Vec<(String, String)>,
}

/// Splits a pipeline at top-level commas (commas inside `{}` belong to options).
pub fn parse_pipeline(s: &str) -> Result<Vec<PassSpec>, String> {
    let mut items = Vec::new();
    let (mut depth, mut start) = (0i32, 0usize);
    for (i, c) in s.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                items.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
        if depth < 0 {
            return Err(format!("unbalanced `}}` in pass pipeline `{s}`"));
        }
    }
    if depth != 0 {
        return Err(format!("unclosed `{{` in pass pipeline `{s}`"));
    }
    items.push(&s[start..]);
    items
        .into_iter()
        .map(str::trim)
        .filter(|i| !i.is_empty())
        .map(parse_item)
        .collect()
}

fn parse_item(item: &str) -> Result<PassSpec, String> {
    let (name, opts) = match item.split_once('{') {
        None => (item, ""),
        Some((n, rest)) => (
            n,
            rest.strip_suffix('}')
                .ok_or_else(|| format!("`{item}`: options must end with `}}`"))?,
        ),
    };
    let valid = |s: &str| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    };
    if !valid(name.trim()) {
        return Err(format!("`{item}` is not a pass name"));
    }
    let options = opts
        .split(',')
        .map(str::trim)
        .filter(|o| !o.is_empty())
        .map(|o| match o.split_once('=') {
            Some((k, v)) if valid(k.trim()) => Ok((k.trim().to_string(), v.trim().to_string())),
            _ => Err(format!("pass option `{o}` must be key=value")),
        })
        .collect::<Result<_, _>>()?;
    Ok(PassSpec {
        name: name.trim().to_string(),
        options,
    })
}

/// How to run a pipeline (the `tapc opt` flags).
#[derive(Clone, Debug, Default)]
pub struct RunConfig {
    pub print_after_all: bool,
    pub print_after: Vec<String>,
    pub time_passes: bool,
    /// `(pass, key, value)`: options put before every entry of that pass's own (defaults the
    /// entry can override, e.g. the driver's `progress=true` on a terminal).
    pub pass_defaults: Vec<(String, String, String)>,
    /// `(pass, key, value)`: options put after every entry of that pass's own, as if written
    /// last in its `{}` (the driver's `--machine`, `--seed`, ... flags; they win).
    pub pass_options: Vec<(String, String, String)>,
    /// The input files the options name, read by the driver ([`input_paths`]).
    pub files: PassFiles,
}

fn unknown_pass(name: &str) -> Diagnostic {
    let list: Vec<&str> = registry().iter().map(|p| p.name).collect();
    Diagnostic::error(codes::BAD_PASS, format!("unknown pass `{name}`"))
        .note(format!("registered passes: {}", list.join(", ")))
}

/// The options of pipeline entry `s`: the config's defaults for its pass, its own, then the
/// config's options for its pass (which win).
fn entry_options(s: &PassSpec, config: &RunConfig) -> Vec<(String, String)> {
    let extra = |list: &[(String, String, String)]| -> Vec<(String, String)> {
        list.iter()
            .filter(|o| o.0 == s.name)
            .map(|o| (o.1.clone(), o.2.clone()))
            .collect()
    };
    let mut options = extra(&config.pass_defaults);
    options.extend(s.options.iter().cloned());
    options.extend(extra(&config.pass_options));
    options
}

/// The input files `pipeline` names in its options (and in `config`'s), for the driver to read
/// into [`RunConfig::files`]. A pipeline that does not parse names none ([`build`] reports it).
pub fn input_paths(pipeline: &str, config: &RunConfig) -> Vec<String> {
    let specs = parse_pipeline(pipeline).unwrap_or_default();
    let mut paths = Vec::new();
    for s in &specs {
        let Some(info) = registry().iter().find(|p| p.name == s.name) else {
            continue;
        };
        for (k, v) in entry_options(s, config) {
            if info.files.contains(&k.as_str()) && !paths.contains(&v) {
                paths.push(v);
            }
        }
    }
    paths
}

/// Builds the passes of `pipeline` (every name and option is checked before anything runs).
pub fn build(pipeline: &str, config: &RunConfig) -> Result<Vec<Box<dyn Pass>>, Diagnostic> {
    let specs = parse_pipeline(pipeline).map_err(|e| Diagnostic::error(codes::BAD_PASS, e))?;
    if let Some(n) = config
        .print_after
        .iter()
        .find(|n| !registry().iter().any(|p| p.name == n.as_str()))
    {
        return Err(unknown_pass(n));
    }
    specs
        .iter()
        .map(|s| {
            let info = registry()
                .iter()
                .find(|p| p.name == s.name)
                .ok_or_else(|| unknown_pass(&s.name))?;
            (info.create)(&entry_options(s, config), &config.files)
                .map_err(|e| Diagnostic::error(codes::BAD_PASS, format!("pass `{}`: {e}", s.name)))
        })
        .collect()
}

/// Runs `pipeline` over `m`, starting from verified `facts`. Printing and timing go to `log`.
pub fn run_pipeline(
    m: &mut Module,
    facts: Vec<GraphFacts>,
    pipeline: &str,
    config: &RunConfig,
    log: &mut String,
) -> Result<PipelineOutput, Diagnostic> {
    // No other pass reads a `grad` statement: it is lowered first whatever the pipeline says.
    let first_is_grad =
        parse_pipeline(pipeline).is_ok_and(|s| s.first().is_some_and(|p| p.name == "grad"));
    let pipeline = if m.graphs.iter().any(crate::ir::Graph::has_grad) && !first_is_grad {
        format!("grad,{pipeline}")
    } else {
        pipeline.to_string()
    };
    let passes = build(&pipeline, config)?;
    let mut cx = PassContext::new(facts);
    let mut times: Vec<(&'static str, Duration)> = Vec::new();
    for mut pass in passes {
        let start = Instant::now();
        pass.run(m, &mut cx).map_err(|d| {
            if d.code.is_some() {
                d
            } else {
                Diagnostic {
                    code: Some(codes::PASS_FAILED),
                    ..d
                }
            }
        })?;
        times.push((pass.name(), start.elapsed()));
        // Verify after every pass (as MLIR does); it also refreshes the facts.
        cx.refresh(m).map_err(|d| {
            Diagnostic::error(
                codes::PASS_FAILED,
                format!(
                    "pass `{}` produced a module that does not verify: {}",
                    pass.name(),
                    d.message
                ),
            )
            .note("this is a compiler bug; please report it with the input file")
            .note(print_module(m))
        })?;
        if config.print_after_all || config.print_after.iter().any(|n| n == pass.name()) {
            log.push_str(&format!(
                "// -----// IR Dump After {} //----- //\n{}\n",
                pass.name(),
                print_module(m)
            ));
        }
    }
    if config.time_passes {
        log.push_str(&timing_report(&times));
    }
    Ok(cx.finish())
}

fn timing_report(times: &[(&str, Duration)]) -> String {
    let total: f64 = times.iter().map(|t| t.1.as_secs_f64()).sum();
    let bar = "===-------------------------------------------------------------------------===";
    let mut s = format!("{bar}\n                      ... Pass execution timing report ...\n{bar}\n  Total Execution Time: {total:.4} seconds\n\n  ----Wall Time----  ----Name----\n");
    let pct = |t: f64| if total > 0.0 { 100.0 * t / total } else { 0.0 };
    for (n, t) in times {
        let t = t.as_secs_f64();
        s.push_str(&format!("  {t:>8.4} ({:>5.1}%)  {n}\n", pct(t)));
    }
    s.push_str(&format!("  {total:>8.4} (100.0%)  Total\n"));
    s
}
