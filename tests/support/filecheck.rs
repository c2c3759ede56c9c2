//! A small, pure FileCheck engine (LLVM FileCheck semantics) for filetests.
//!
//! Directives (`CHECK:`, `CHECK-NEXT:`, `CHECK-SAME:`, `CHECK-NOT:`, `CHECK-LABEL:`,
//! `CHECK-DAG:`, `CHECK-EMPTY:`, `CHECK-COUNT-<n>:`) are read from any line of a source
//! text and matched against an output text. Patterns are substrings with `{{regex}}`
//! inline regexes, `[[NAME:regex]]` captures, `[[NAME]]` uses and `[[@LINE]]`/`[[@LINE+n]]`.
//! Runs of spaces/tabs are canonicalized to one space in both patterns and output unless
//! `strict_whitespace` is set.

use regex::Regex;
use std::collections::HashMap;
use std::fmt::Write as _;

/// How directives are recognised and compared.
#[derive(Clone, Debug)]
pub struct Options {
    /// Directive prefix, `CHECK` by default (so `FOO` gives `FOO:`, `FOO-NEXT:`, ...).
    pub prefix: String,
    /// Disables horizontal-whitespace canonicalization (FileCheck's `--strict-whitespace`).
    pub strict_whitespace: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            prefix: "CHECK".to_string(),
            strict_whitespace: false,
        }
    }
}

/// The kind of a directive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Plain,
    Next,
    Same,
    Not,
    Label,
    Dag,
    Empty,
    Count(usize),
}

impl Kind {
    fn suffix(self) -> String {
        match self {
            Kind::Plain => String::new(),
            Kind::Next => "-NEXT".into(),
            Kind::Same => "-SAME".into(),
            Kind::Not => "-NOT".into(),
            Kind::Label => "-LABEL".into(),
            Kind::Dag => "-DAG".into(),
            Kind::Empty => "-EMPTY".into(),
            Kind::Count(n) => format!("-COUNT-{n}"),
        }
    }

    fn is_positive(self) -> bool {
        !matches!(self, Kind::Not)
    }
}

/// One piece of a pattern.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Piece {
    Lit(String),
    Regex(String),
    Def(String, String),
    Use(String),
    Line(i64),
}

/// A parsed directive from the source text.
#[derive(Clone, Debug)]
pub struct Directive {
    pub kind: Kind,
    /// 1-based line in the directives source.
    pub line: usize,
    /// The directive as written, e.g. `CHECK-NEXT: foo`, for messages.
    pub text: String,
    pieces: Vec<Piece>,
}

impl Directive {
    fn name(&self, prefix: &str) -> String {
        format!("{prefix}{}", self.kind.suffix())
    }
}

/// True if `source` contains at least one directive with `prefix` (parse errors count as yes,
/// so that a malformed directive is reported rather than silently skipped).
pub fn has_directives(source: &str, prefix: &str) -> bool {
    source
        .lines()
        .any(|l| matches!(find_directive(l, prefix), Ok(Some(_)) | Err(_)))
}

/// Checks `output` against the `CHECK` directives in `source`.
pub fn check(source: &str, output: &str) -> Result<(), String> {
    check_with(source, output, &Options::default())
}

/// Checks `output` against the directives in `source` using `opts`.
pub fn check_with(source: &str, output: &str, opts: &Options) -> Result<(), String> {
    let directives = parse(source, opts)?;
    if directives.is_empty() {
        return Err(format!("no {}: directives found", opts.prefix));
    }
    let out = Canon::new(output, opts.strict_whitespace);
    Matcher::new(&out, opts).run(&directives)
}

/// Parses all directives in `source`.
pub fn parse(source: &str, opts: &Options) -> Result<Vec<Directive>, String> {
    let mut out = Vec::new();
    let mut errors = Vec::new();
    for (i, raw) in source.lines().enumerate() {
        match parse_line(raw, i + 1, opts) {
            Ok(Some(d)) => out.push(d),
            Ok(None) => {}
            Err(e) => errors.push(format!("line {}: {e}\n  {}", i + 1, raw.trim())),
        }
    }
    if errors.is_empty() {
        validate_order(&out, &opts.prefix)?;
        Ok(out)
    } else {
        Err(errors.join("\n"))
    }
}

fn parse_line(raw: &str, line: usize, opts: &Options) -> Result<Option<Directive>, String> {
    let Some((kind, start, rest)) = find_directive(raw, &opts.prefix)? else {
        return Ok(None);
    };
    // FileCheck canonicalizes the check file as well as the input.
    let pat = canon_ws(rest.trim(), opts.strict_whitespace);
    let pieces = parse_pattern(&pat)?;
    let d = Directive {
        kind,
        line,
        text: raw[start..].trim().to_string(),
        pieces,
    };
    validate_directive(&d, &opts.prefix)?;
    Ok(Some(d))
}

/// Finds `PREFIX[-SUFFIX]:` at a word boundary; returns kind, its byte offset and the rest.
fn find_directive<'a>(
    line: &'a str,
    prefix: &str,
) -> Result<Option<(Kind, usize, &'a str)>, String> {
    for (at, _) in line.match_indices(prefix) {
        let before_ok = line[..at]
            .chars()
            .next_back()
            .is_none_or(|c| !(c.is_alphanumeric() || c == '_' || c == '-'));
        if !before_ok {
            continue;
        }
        let after = &line[at + prefix.len()..];
        if let Some(rest) = after.strip_prefix(':') {
            return Ok(Some((Kind::Plain, at, rest)));
        }
        if let Some(found) = parse_suffix(after, prefix)? {
            return Ok(Some((found.0, at, found.1)));
        }
    }
    Ok(None)
}

/// Parses `-NEXT:` etc. after the prefix; unknown `-UPPER:` suffixes are typos and errors.
fn parse_suffix<'a>(after: &'a str, prefix: &str) -> Result<Option<(Kind, &'a str)>, String> {
    let Some(body) = after.strip_prefix('-') else {
        return Ok(None);
    };
    let Some(colon) = body.find(':') else {
        return Ok(None);
    };
    let name = &body[..colon];
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '-')
    {
        return Ok(None);
    }
    let kind = match name {
        "NEXT" => Kind::Next,
        "SAME" => Kind::Same,
        "NOT" => Kind::Not,
        "LABEL" => Kind::Label,
        "DAG" => Kind::Dag,
        "EMPTY" => Kind::Empty,
        _ => parse_count(name).ok_or_else(|| format!("unknown directive `{prefix}-{name}:`"))?,
    };
    Ok(Some((kind, &body[colon + 1..])))
}

fn parse_count(name: &str) -> Option<Kind> {
    let n: usize = name.strip_prefix("COUNT-")?.parse().ok()?;
    (n > 0).then_some(Kind::Count(n))
}

fn validate_directive(d: &Directive, prefix: &str) -> Result<(), String> {
    let name = d.name(prefix);
    if d.kind == Kind::Empty && !d.pieces.is_empty() {
        return Err(format!("{name}: must not have a pattern"));
    }
    if d.kind != Kind::Empty && d.pieces.is_empty() {
        return Err(format!("found empty check string with prefix '{name}:'"));
    }
    let defines = d.pieces.iter().any(|p| matches!(p, Piece::Def(..)));
    let uses = d.pieces.iter().any(|p| matches!(p, Piece::Use(..)));
    // Labels are located before their preceding block is checked, so variables make no sense there.
    if (defines || uses) && d.kind == Kind::Label {
        return Err(format!("{name}: cannot define or use variables"));
    }
    if defines && d.kind == Kind::Not {
        return Err(format!("{name}: cannot define variables"));
    }
    Ok(())
}

/// FileCheck rejects NEXT/SAME/EMPTY before any positive directive: there is nothing to anchor to.
fn validate_order(ds: &[Directive], prefix: &str) -> Result<(), String> {
    let mut seen_positive = false;
    for d in ds {
        if matches!(d.kind, Kind::Next | Kind::Same | Kind::Empty) && !seen_positive {
            return Err(format!(
                "line {}: found '{}' without previous '{prefix}:' line",
                d.line,
                d.name(prefix)
            ));
        }
        seen_positive |= d.kind.is_positive();
    }
    Ok(())
}

/// Splits a pattern into literal text, `{{regex}}` and `[[...]]` pieces.
fn parse_pattern(pat: &str) -> Result<Vec<Piece>, String> {
    let mut pieces = Vec::new();
    let mut rest = pat;
    while !rest.is_empty() {
        let next = [rest.find("{{"), rest.find("[[")]
            .into_iter()
            .flatten()
            .min();
        let Some(at) = next else {
            pieces.push(Piece::Lit(rest.to_string()));
            break;
        };
        if at > 0 {
            pieces.push(Piece::Lit(rest[..at].to_string()));
        }
        let (piece, len) = if rest[at..].starts_with("{{") {
            parse_regex_piece(&rest[at..])?
        } else {
            parse_var_piece(&rest[at..])?
        };
        pieces.push(piece);
        rest = &rest[at + len..];
    }
    Ok(pieces)
}

fn parse_regex_piece(s: &str) -> Result<(Piece, usize), String> {
    let end = s[2..].find("}}").ok_or("unterminated `{{` regex")? + 2;
    let re = &s[2..end];
    if re.is_empty() {
        return Err("empty `{{}}` regex".into());
    }
    Regex::new(re).map_err(|e| format!("invalid regex `{{{{{re}}}}}`: {e}"))?;
    Ok((Piece::Regex(re.to_string()), end + 2))
}

fn parse_var_piece(s: &str) -> Result<(Piece, usize), String> {
    let end = find_var_end(&s[2..]).ok_or("unterminated `[[` variable")? + 2;
    let body = &s[2..end];
    let piece = if let Some(expr) = body.strip_prefix("@LINE") {
        Piece::Line(parse_line_offset(expr)?)
    } else if let Some((name, re)) = body.split_once(':') {
        check_var_name(name)?;
        Regex::new(re).map_err(|e| format!("invalid regex in `[[{body}]]`: {e}"))?;
        Piece::Def(name.to_string(), re.to_string())
    } else {
        check_var_name(body)?;
        Piece::Use(body.to_string())
    };
    Ok((piece, end + 2))
}

/// Finds the closing `]]`, skipping brackets of character classes inside the regex (as LLVM does).
fn find_var_end(s: &str) -> Option<usize> {
    let bytes = s.as_bytes();
    let (mut depth, mut i) = (0usize, 0usize);
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 1,
            b'[' => depth += 1,
            b']' if depth > 0 => depth -= 1,
            b']' if bytes.get(i + 1) == Some(&b']') => return Some(i),
            _ => {}
        }
        i += 1;
    }
    None
}

fn parse_line_offset(expr: &str) -> Result<i64, String> {
    let expr: String = expr.chars().filter(|c| !c.is_whitespace()).collect();
    if expr.is_empty() {
        return Ok(0);
    }
    let bad = || format!("bad `[[@LINE{expr}]]` expression (use @LINE, @LINE+n or @LINE-n)");
    let (sign, num) = match expr.split_at(1) {
        ("+", n) => (1, n),
        ("-", n) => (-1, n),
        _ => return Err(bad()),
    };
    num.parse::<i64>().map(|n| sign * n).map_err(|_| bad())
}

fn check_var_name(name: &str) -> Result<(), String> {
    let mut chars = name.chars();
    let ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    if ok {
        Ok(())
    } else {
        Err(format!("invalid variable name `{name}`"))
    }
}

/// Collapses runs of spaces/tabs into one space (FileCheck's default canonicalization).
fn canon_ws(s: &str, strict: bool) -> String {
    if strict {
        return s.to_string();
    }
    Canon::new(s, false).text
}

/// Canonicalized output plus a map back to byte offsets in the original (for messages).
struct Canon<'a> {
    orig: &'a str,
    text: String,
    to_orig: Vec<usize>,
}

impl<'a> Canon<'a> {
    fn new(orig: &'a str, strict: bool) -> Self {
        let mut text = String::with_capacity(orig.len());
        let mut to_orig = Vec::with_capacity(orig.len() + 1);
        let mut prev_ws = false;
        for (i, c) in orig.char_indices() {
            let ws = !strict && (c == ' ' || c == '\t');
            if ws && prev_ws {
                continue;
            }
            prev_ws = ws;
            let c = if ws { ' ' } else { c };
            to_orig.extend(std::iter::repeat_n(i, c.len_utf8()));
            text.push(c);
        }
        to_orig.push(orig.len());
        Canon {
            orig,
            text,
            to_orig,
        }
    }

    /// 1-based line number of a canonical byte offset.
    fn line_of(&self, pos: usize) -> usize {
        self.text[..pos].matches('\n').count() + 1
    }
}

/// A match as a canonical byte range.
type Span = (usize, usize);

/// Runs directives over the output, tracking variables across blocks.
struct Matcher<'a> {
    out: &'a Canon<'a>,
    opts: &'a Options,
    vars: HashMap<String, String>,
}

impl<'a> Matcher<'a> {
    fn new(out: &'a Canon<'a>, opts: &'a Options) -> Self {
        Matcher {
            out,
            opts,
            vars: HashMap::new(),
        }
    }

    /// Splits at CHECK-LABELs and checks each block; errors from all blocks are reported.
    fn run(&mut self, ds: &[Directive]) -> Result<(), String> {
        let mut errors = Vec::new();
        let (mut start, mut i) = (0, 0);
        loop {
            let j = (i..ds.len())
                .find(|&k| ds[k].kind == Kind::Label)
                .unwrap_or(ds.len());
            // Labels are found before their block is checked, so the block ends at the label.
            let label = match ds.get(j).map(|l| self.find_label(l, start)).transpose() {
                Ok(label) => label,
                Err(e) => {
                    errors.push(e);
                    break;
                }
            };
            let end = label.map_or(self.out.text.len(), |s| s.0);
            if let Err(e) = self.check_block(&ds[i..j], (start, end)) {
                errors.push(e);
            }
            let Some(label) = label else { break };
            (start, i) = (label.1, j + 1);
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors.join("\n\n"))
        }
    }

    fn find_label(&mut self, l: &Directive, start: usize) -> Result<Span, String> {
        let end = self.out.text.len();
        self.find(l, start, end)?
            .ok_or_else(|| self.not_found(l, (start, end)))
    }

    /// Checks the directives of one label block within `region`.
    fn check_block(&mut self, ds: &[Directive], region: Span) -> Result<(), String> {
        let (mut pos, end) = region;
        let mut nots: Vec<&Directive> = Vec::new();
        let mut i = 0;
        while i < ds.len() {
            let d = &ds[i];
            let span = match d.kind {
                Kind::Not => {
                    nots.push(d);
                    i += 1;
                    continue;
                }
                Kind::Dag => {
                    let n = ds[i..].iter().take_while(|d| d.kind == Kind::Dag).count();
                    let span = self.match_dag(&ds[i..i + n], pos, end)?;
                    i += n;
                    span
                }
                _ => {
                    i += 1;
                    self.match_positive(d, pos, end)?
                }
            };
            self.check_nots(&nots, (pos, span.0))?;
            nots.clear();
            pos = span.1;
        }
        self.check_nots(&nots, (pos, end))
    }

    /// Matches CHECK / NEXT / SAME / EMPTY / COUNT after `pos` (the previous match's end).
    fn match_positive(&mut self, d: &Directive, pos: usize, end: usize) -> Result<Span, String> {
        if d.kind == Kind::Empty {
            return self.match_empty(d, pos, end);
        }
        let first = self
            .find(d, pos, end)?
            .ok_or_else(|| self.not_found(d, (pos, end)))?;
        self.check_line_distance(d, pos, first)?;
        let Kind::Count(n) = d.kind else {
            return Ok(first);
        };
        let mut last = first;
        for k in 1..n {
            last = self.find(d, last.1, end)?.ok_or_else(|| {
                let s = self.not_found(d, (last.1, end));
                format!("{s}\n  note: matched only {k} of {n} times")
            })?;
        }
        Ok((first.0, last.1))
    }

    /// NEXT must be exactly one line after the previous match; SAME on the same line.
    fn check_line_distance(
        &self,
        d: &Directive,
        prev_end: usize,
        span: Span,
    ) -> Result<(), String> {
        let newlines = self.out.text[prev_end..span.0].matches('\n').count();
        let problem = match (d.kind, newlines) {
            (Kind::Next, 0) => "is on the same line as the previous match",
            (Kind::Next, 1) | (Kind::Same, 0) => return Ok(()),
            (Kind::Next, _) => "is not on the line after the previous match",
            (Kind::Same, _) => "is not on the same line as the previous match",
            _ => return Ok(()),
        };
        let prev_line = self.out.line_of(prev_end);
        Err(format!(
            "{}\n{}\n  note: previous match ended on output line {prev_line}",
            self.header(d, problem),
            self.show_match(span)
        ))
    }

    /// CHECK-EMPTY: the line after the previous match's line must exist and be empty.
    fn match_empty(&self, d: &Directive, pos: usize, end: usize) -> Result<Span, String> {
        let text = &self.out.text[..end];
        let next = text[pos..].find('\n').map(|n| pos + n + 1);
        match next {
            Some(ls) if ls < end && text[ls..].starts_with('\n') => Ok((ls, ls)),
            Some(ls) if ls < end => Err(format!(
                "{}\n{}",
                self.header(d, "expected an empty line"),
                self.show_match((ls, ls + text[ls..].find('\n').unwrap_or(end - ls)))
            )),
            _ => Err(self.header(d, "expected an empty line, but the output ends")),
        }
    }

    /// Matches a group of CHECK-DAGs in any order without overlap; returns (min start, max end).
    fn match_dag(&mut self, group: &[Directive], pos: usize, end: usize) -> Result<Span, String> {
        let mut taken: Vec<Span> = Vec::new();
        for d in group {
            let span = self.find_unoverlapped(d, pos, end, &taken)?;
            taken.push(span);
        }
        let start = taken.iter().map(|s| s.0).min().unwrap_or(pos);
        let stop = taken.iter().map(|s| s.1).max().unwrap_or(pos);
        Ok((start, stop))
    }

    fn find_unoverlapped(
        &mut self,
        d: &Directive,
        pos: usize,
        end: usize,
        taken: &[Span],
    ) -> Result<Span, String> {
        let mut from = pos;
        loop {
            let Some(span) = self.find(d, from, end)? else {
                return Err(self.not_found(d, (pos, end)));
            };
            match taken
                .iter()
                .find(|t| (span.0 < t.1 && t.0 < span.1) || span == **t)
            {
                Some(t) => from = t.1.max(span.0 + 1),
                None => return Ok(span),
            }
            if from > end {
                return Err(self.not_found(d, (pos, end)));
            }
        }
    }

    /// Fails if any pending CHECK-NOT matches within `region`.
    fn check_nots(&mut self, nots: &[&Directive], region: Span) -> Result<(), String> {
        for d in nots {
            if let Some(span) = self.find(d, region.0, region.1)? {
                return Err(format!(
                    "{}\n{}",
                    self.header(d, "excluded string found in output"),
                    self.show_match(span)
                ));
            }
        }
        Ok(())
    }

    /// Finds the first match of `d` in `[from, end)`, recording captured variables.
    fn find(&mut self, d: &Directive, from: usize, end: usize) -> Result<Option<Span>, String> {
        if from > end {
            return Ok(None);
        }
        let re = self.compile(d)?;
        let hay = &self.out.text[..end];
        let Some(caps) = re.captures_at(hay, from) else {
            return Ok(None);
        };
        let m = caps.get(0).expect("group 0 always matches");
        for p in &d.pieces {
            if let Piece::Def(name, _) = p {
                let value = caps.name(name).map_or("", |c| c.as_str());
                self.vars.insert(name.clone(), value.to_string());
            }
        }
        Ok(Some((m.start(), m.end())))
    }

    /// Builds the regex for a directive from its pieces and the current variables.
    fn compile(&self, d: &Directive) -> Result<Regex, String> {
        let mut re = String::from("(?m)");
        let mut defined: Vec<&str> = Vec::new();
        for p in &d.pieces {
            match p {
                Piece::Lit(s) => re.push_str(&regex::escape(s)),
                Piece::Regex(r) => write!(re, "(?:{r})").unwrap(),
                Piece::Def(name, r) => {
                    if defined.contains(&name.as_str()) {
                        return Err(self.header(
                            d,
                            &format!("variable `{name}` defined twice in one pattern"),
                        ));
                    }
                    defined.push(name);
                    write!(re, "(?P<{name}>{r})").unwrap();
                }
                Piece::Use(name) => re.push_str(&regex::escape(self.var(d, name, &defined)?)),
                Piece::Line(off) => write!(re, "{}", d.line as i64 + off).unwrap(),
            }
        }
        Regex::new(&re).map_err(|e| self.header(d, &format!("invalid pattern: {e}")))
    }

    fn var(&self, d: &Directive, name: &str, defined: &[&str]) -> Result<&str, String> {
        if defined.contains(&name) {
            let msg =
                format!("`[[{name}]]` used in the same pattern that defines it (unsupported)");
            return Err(self.header(d, &msg));
        }
        self.vars
            .get(name)
            .map(String::as_str)
            .ok_or_else(|| self.header(d, &format!("uses undefined variable `[[{name}]]`")))
    }

    /// `check line N: CHECK-NEXT: problem` plus the directive text and variable values.
    fn header(&self, d: &Directive, problem: &str) -> String {
        let mut s = format!(
            "check line {}: {}: {problem}\n  {}",
            d.line,
            d.name(&self.opts.prefix),
            d.text
        );
        for p in &d.pieces {
            if let Piece::Use(name) = p {
                if let Some(v) = self.vars.get(name) {
                    write!(s, "\n  note: with \"{name}\" equal to \"{v}\"").unwrap();
                }
            }
        }
        s
    }

    fn not_found(&self, d: &Directive, region: Span) -> String {
        let mut s = self.header(d, "expected string not found in output");
        s.push('\n');
        s.push_str(&self.show_region(region));
        if let Some(hint) = self.hint(d, region) {
            s.push_str(&hint);
        }
        s
    }

    /// Suggests the region line sharing the most words with the pattern's literal text.
    fn hint(&self, d: &Directive, region: Span) -> Option<String> {
        let words: Vec<&str> = d
            .pieces
            .iter()
            .filter_map(|p| {
                if let Piece::Lit(s) = p {
                    Some(s.as_str())
                } else {
                    None
                }
            })
            .flat_map(str::split_whitespace)
            .collect();
        let first = self.out.line_of(region.0);
        let text = &self.out.text[region.0..region.1];
        let (score, idx) = text
            .split('\n')
            .enumerate()
            .map(|(i, l)| (words.iter().filter(|w| l.contains(*w)).count(), i))
            .max_by_key(|&(score, i)| (score, std::cmp::Reverse(i)))?;
        (score > 0).then(|| {
            format!(
                "\n  note: possible intended match at output line {}",
                first + idx
            )
        })
    }

    /// Shows the searched output region with line numbers (original, uncanonicalized text).
    fn show_region(&self, (start, end): Span) -> String {
        let (os, oe) = (self.out.to_orig[start], self.out.to_orig[end]);
        if self.out.orig.is_empty() {
            return "  (output is empty)".into();
        }
        let first = self.out.orig[..os].matches('\n').count() + 1;
        let line_start = self.out.orig[..os].rfind('\n').map_or(0, |n| n + 1);
        let col = os - line_start + 1;
        let mut s = format!("  searched output from line {first}, column {col}:");
        let body = &self.out.orig[line_start..oe];
        let lines: Vec<&str> = body
            .strip_suffix('\n')
            .unwrap_or(body)
            .split('\n')
            .collect();
        const MAX: usize = 40;
        for (i, l) in lines.iter().take(MAX).enumerate() {
            write!(s, "\n  {:>5} | {l}", first + i).unwrap();
        }
        if lines.len() > MAX {
            write!(s, "\n        | ... ({} more lines)", lines.len() - MAX).unwrap();
        }
        s
    }

    /// Shows the output line containing a match with a caret underline.
    fn show_match(&self, (start, end): Span) -> String {
        let (os, oe) = (self.out.to_orig[start], self.out.to_orig[end]);
        let orig = self.out.orig;
        let line_no = orig[..os].matches('\n').count() + 1;
        let ls = orig[..os].rfind('\n').map_or(0, |n| n + 1);
        let le = orig[os..].find('\n').map_or(orig.len(), |n| os + n);
        let width = orig[os..oe.min(le).max(os)].chars().count().max(1);
        let pad = orig[ls..os].chars().count();
        format!(
            "  found at output line {line_no}:\n  {line_no:>5} | {}\n        | {}{}",
            &orig[ls..le],
            " ".repeat(pad),
            "^".repeat(width)
        )
    }
}
