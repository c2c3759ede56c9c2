//! Parsing `--passes=` pipelines (`name`, `name{key=value,...}`, comma-separated) and running
//! them. No pass is registered yet, so only the empty pipeline runs; any name is an error that
//! says so rather than being ignored.

use crate::diag::{codes, Diagnostic};
use crate::ir::Module;
use crate::verify::GraphFacts;

pub struct Options {
    pub pipeline: String,
    pub print_after_all: bool,
    pub print_after: Vec<String>,
    pub verify_each: bool,
    pub time_passes: bool,
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

/// Runs the pipeline over `m`; `log` collects --print-after / --time-passes output.
pub fn run_pipeline(
    m: &mut Module,
    facts: &mut Vec<GraphFacts>,
    opts: &Options,
    log: &mut String,
) -> Result<(), Diagnostic> {
    let specs =
        parse_pipeline(&opts.pipeline).map_err(|e| Diagnostic::error(codes::BAD_PASS, e))?;
    let known = crate::passes::REGISTERED;
    let list = if known.is_empty() {
        "none yet".to_string()
    } else {
        known.join(", ")
    };
    let unknown = specs
        .iter()
        .map(|p| p.name.as_str())
        .chain(opts.print_after.iter().map(String::as_str))
        .find(|n| !known.contains(n));
    if let Some(name) = unknown {
        return Err(
            Diagnostic::error(codes::BAD_PASS, format!("unknown pass `{name}`"))
                .note(format!("registered passes: {list}")),
        );
    }
    if opts.print_after_all && specs.is_empty() {
        log.push_str("// -----// no passes ran: nothing to print after //----- //\n");
    }
    if opts.verify_each || cfg!(debug_assertions) {
        let (diags, new_facts) = crate::verify::verify(m);
        if let Some(d) = diags.0.into_iter().find(Diagnostic::is_error) {
            return Err(d);
        }
        *facts = new_facts;
    }
    if opts.time_passes {
        log.push_str("===-------------------------------------------===\n  pass execution timing report: no passes ran\n");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pipelines_with_options_split_at_top_level_commas() {
        let p = parse_pipeline("canonicalize, shard{parts=4,dims=auto},fuse").unwrap();
        assert_eq!(p.len(), 3);
        assert_eq!(p[1].name, "shard");
        assert_eq!(
            p[1].options,
            vec![("parts".into(), "4".into()), ("dims".into(), "auto".into())]
        );
        assert!(parse_pipeline("").unwrap().is_empty());
    }

    #[test]
    fn malformed_pipelines_are_errors() {
        assert!(parse_pipeline("shard{parts=4").is_err());
        assert!(parse_pipeline("shard}").is_err());
        assert!(parse_pipeline("shard{parts}").is_err());
        assert!(parse_pipeline("sh ard").is_err());
    }
}
