//! Expected-diagnostic annotations (`// ERROR@+1: E0012 message`) and their comparison
//! against the JSON diagnostics printed by `tapc check FILE --error-format=json`.
//!
//! Syntax, inside a `//` comment anywhere on a line: `ERROR`, `WARNING` or `NOTE`, an
//! optional `@+N` / `@-N` line offset (default: the annotation's own line), a colon, an
//! optional code (`E0012`: uppercase letters then digits) and an optional message substring.

use serde_json::Value;
use std::fmt;

/// Diagnostic severity, as spelled in the JSON `severity` field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Severity {
    Error,
    Warning,
    Note,
}

impl Severity {
    fn from_keyword(word: &str) -> Option<Self> {
        match word {
            "ERROR" => Some(Severity::Error),
            "WARNING" => Some(Severity::Warning),
            "NOTE" => Some(Severity::Note),
            _ => None,
        }
    }

    fn from_json(word: &str) -> Option<Self> {
        Self::from_keyword(&word.to_ascii_uppercase())
    }
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Note => "note",
        })
    }
}

/// One expected diagnostic.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Annotation {
    pub severity: Severity,
    /// Required code, if the annotation names one.
    pub code: Option<String>,
    /// Required message substring, if any.
    pub message: Option<String>,
    /// 1-based line the diagnostic's primary label must start on.
    pub line: usize,
    /// 1-based line the annotation itself is written on.
    pub written_on: usize,
}

impl fmt::Display for Annotation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.severity)?;
        if let Some(code) = &self.code {
            write!(f, " {code}")?;
        }
        if let Some(msg) = &self.message {
            write!(f, " containing {msg:?}")?;
        }
        write!(f, " (annotation on line {})", self.written_on)
    }
}

/// One reported diagnostic, reduced to what annotations can check.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    pub severity: Severity,
    pub code: Option<String>,
    pub message: String,
    pub file: Option<String>,
    /// Start line of the primary label, if the diagnostic has one.
    pub line: Option<usize>,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(line) => write!(f, "line {line}: ")?,
            None => write!(f, "(no primary label): ")?,
        }
        write!(f, "{}", self.severity)?;
        if let Some(code) = &self.code {
            write!(f, " {code}")?;
        }
        write!(f, ": {}", self.message)
    }
}

/// Parses all annotations in `source`; malformed ones are errors, not silently skipped.
pub fn parse(source: &str) -> Result<Vec<Annotation>, String> {
    let total = source.lines().count();
    let mut out = Vec::new();
    let mut errors = Vec::new();
    for (i, text) in source.lines().enumerate() {
        match parse_line(text, i + 1, total) {
            Ok(Some(a)) => out.push(a),
            Ok(None) => {}
            Err(e) => errors.push(format!("line {}: {e}\n  {}", i + 1, text.trim())),
        }
    }
    if errors.is_empty() {
        Ok(out)
    } else {
        Err(errors.join("\n"))
    }
}

fn parse_line(text: &str, line: usize, total: usize) -> Result<Option<Annotation>, String> {
    let Some(comment) = text.find("//").map(|at| text[at + 2..].trim_start()) else {
        return Ok(None);
    };
    let word_len = comment
        .find(|c: char| !c.is_ascii_uppercase())
        .unwrap_or(comment.len());
    let Some(severity) = Severity::from_keyword(&comment[..word_len]) else {
        return Ok(None);
    };
    let rest = &comment[word_len..];
    // `ERROR` followed by anything but `:` or `@` is ordinary prose, not an annotation.
    let (offset, body) = match rest.chars().next() {
        Some(':') => (0, &rest[1..]),
        Some('@') => parse_offset(&rest[1..])?,
        _ => return Ok(None),
    };
    let target = line as i64 + offset;
    if target < 1 || target > total as i64 {
        return Err(format!(
            "annotation targets line {target}, outside the file (1..={total})"
        ));
    }
    let (code, message) = split_code(body.trim());
    Ok(Some(Annotation {
        severity,
        code,
        message,
        line: target as usize,
        written_on: line,
    }))
}

/// Parses `+N:` / `-N:` after the `@`, returning the offset and the text after the colon.
fn parse_offset(s: &str) -> Result<(i64, &str), String> {
    let bad = || "expected `@+N:` or `@-N:` after the severity".to_string();
    let (spec, body) = s.split_once(':').ok_or_else(bad)?;
    let sign = match spec.chars().next() {
        Some('+') => 1,
        Some('-') => -1,
        _ => return Err(bad()),
    };
    let n: i64 = spec[1..].parse().map_err(|_| bad())?;
    Ok((sign * n, body))
}

/// Splits `E0012 some message` into an optional code and an optional message substring.
fn split_code(body: &str) -> (Option<String>, Option<String>) {
    let (first, rest) = body.split_once(char::is_whitespace).unwrap_or((body, ""));
    let (code, msg) = if is_code(first) {
        (Some(first.to_string()), rest.trim())
    } else {
        (None, body)
    };
    (code, (!msg.is_empty()).then(|| msg.to_string()))
}

fn is_code(s: &str) -> bool {
    let letters = s.chars().take_while(char::is_ascii_uppercase).count();
    letters > 0 && s.len() > letters && s[letters..].chars().all(|c| c.is_ascii_digit())
}

/// Parses the JSON-lines stderr of `check --error-format=json`; blank lines are ignored.
pub fn parse_diagnostics(stderr: &str) -> Result<Vec<Diagnostic>, String> {
    stderr
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(Diagnostic::from_json)
        .collect()
}

impl Diagnostic {
    /// Parses one JSON diagnostic object.
    pub fn from_json(line: &str) -> Result<Self, String> {
        let bad = |why: &str| format!("not a JSON diagnostic ({why}): {line}");
        let v: Value = serde_json::from_str(line).map_err(|e| bad(&e.to_string()))?;
        let severity = v["severity"].as_str().and_then(Severity::from_json);
        let message = v["message"].as_str();
        let (Some(severity), Some(message)) = (severity, message) else {
            return Err(bad("missing or invalid `severity`/`message`"));
        };
        Ok(Diagnostic {
            severity,
            code: v["code"].as_str().map(str::to_string),
            message: message.to_string(),
            file: v["file"].as_str().map(str::to_string),
            line: primary_line(&v),
        })
    }
}

fn primary_line(v: &Value) -> Option<usize> {
    let labels = v["labels"].as_array()?;
    let primary = labels.iter().find(|l| l["style"] == "primary")?;
    primary["line_start"].as_u64().map(|n| n as usize)
}

fn matches(a: &Annotation, d: &Diagnostic) -> bool {
    a.severity == d.severity
        && d.line == Some(a.line)
        && a.code.as_ref().is_none_or(|c| d.code.as_ref() == Some(c))
        && a.message
            .as_ref()
            .is_none_or(|m| d.message.contains(m.as_str()))
}

/// Every annotation must match a distinct diagnostic, and every error must be annotated.
pub fn compare(expected: &[Annotation], actual: &[Diagnostic]) -> Result<(), String> {
    let mut used = vec![false; actual.len()];
    // Most specific annotations first, so a vague one cannot steal another's diagnostic.
    let mut order: Vec<&Annotation> = expected.iter().collect();
    order.sort_by_key(|a| (a.message.is_none(), a.code.is_none()));
    let mut missing = Vec::new();
    for a in order {
        let hit = (0..actual.len()).find(|&i| !used[i] && matches(a, &actual[i]));
        match hit {
            Some(i) => used[i] = true,
            None => missing.push(a),
        }
    }
    let unexpected: Vec<&Diagnostic> = actual
        .iter()
        .zip(&used)
        .filter(|(d, used)| !**used && d.severity == Severity::Error)
        .map(|(d, _)| d)
        .collect();
    report(missing, &unexpected, actual)
}

fn report(
    mut missing: Vec<&Annotation>,
    unexpected: &[&Diagnostic],
    all: &[Diagnostic],
) -> Result<(), String> {
    if missing.is_empty() && unexpected.is_empty() {
        return Ok(());
    }
    missing.sort_by_key(|a| (a.line, a.written_on));
    let mut out = String::from("diagnostics do not match annotations");
    if !missing.is_empty() {
        out.push_str("\nexpected but not reported:");
        for a in missing {
            out.push_str(&format!("\n  {a}"));
            for d in all.iter().filter(|d| d.line == Some(a.line)) {
                out.push_str(&format!("\n      reported on that line: {d}"));
            }
        }
    }
    if !unexpected.is_empty() {
        out.push_str("\nreported but not annotated:");
        for d in unexpected {
            out.push_str(&format!("\n  {d}"));
        }
    }
    Err(out)
}
