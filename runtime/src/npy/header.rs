//! A small, strict, panic-free parser for the header dictionary of a `.npy` file
//! (`{'descr': '<f4', 'fortran_order': False, 'shape': (64, 784), }`).
//!
//! It accepts the subset of Python literal syntax numpy writes (strings, integers,
//! `True`/`False`/`None`, tuples, lists, dicts) with a bounded nesting depth, so that
//! hostile or corrupt headers are rejected with a precise message before any bytes
//! reach `npyz` (whose general Python-literal parser can panic or recurse deeply on
//! some inputs).

/// Deepest bracket nesting accepted (a structured dtype needs about 4).
const MAX_DEPTH: usize = 16;

/// The keys of a header dictionary, for messages.
const KEYS: &str = "'descr', 'fortran_order' and 'shape'";

/// What a header's shape must be, for messages.
const SHAPE_WANTED: &str = "a tuple of non-negative integers";

/// What a valid header dictionary says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HeaderDict {
    pub descr: Descr,
    pub fortran_order: bool,
    pub shape: Vec<u64>,
}

/// The `'descr'` entry: a plain type string like `'<f4'`, or anything else
/// (a structured dtype list, ...), kept as its source text for messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Descr {
    TypeStr(String),
    Other(String),
}

#[derive(Debug, Clone, PartialEq)]
enum Lit {
    Str(String),
    /// A literal integer; `None` if it is negative or does not fit in `u64`.
    Int(Option<u64>),
    Bool(bool),
    Null,
    Seq(Vec<Lit>),
    Dict(Vec<(Lit, Lit)>),
}

struct Parser<'a> {
    src: &'a str,
    bytes: &'a [u8],
    pos: usize,
    depth: usize,
}

/// Parses the header text (the bytes after the length field, typically ending
/// in spaces and a newline). Errors describe what was expected and found.
pub(crate) fn parse_header_dict(text: &str) -> Result<HeaderDict, String> {
    let mut p = Parser {
        src: text,
        bytes: text.as_bytes(),
        pos: 0,
        depth: 0,
    };
    p.skip_ws();
    if p.peek() != Some(b'{') {
        return Err(format!(
            "expected a dictionary literal starting with '{{', found {}",
            p.found()
        ));
    }
    p.pos += 1;
    p.depth = 1;
    let mut descr = None;
    let mut fortran_order = None;
    let mut shape = None;
    loop {
        p.skip_ws();
        if p.peek() == Some(b'}') {
            p.pos += 1;
            break;
        }
        let key = match p.value()? {
            Lit::Str(s) => s,
            _ => return Err("expected the dictionary keys to be strings".into()),
        };
        p.expect(b':')?;
        p.skip_ws();
        let start = p.pos;
        let value = p.value()?;
        let raw = p.src[start..p.pos].trim().to_string();
        let slot_taken = match key.as_str() {
            "descr" => descr
                .replace(match value {
                    Lit::Str(s) => Descr::TypeStr(s),
                    _ => Descr::Other(raw),
                })
                .is_some(),
            "fortran_order" => match value {
                Lit::Bool(b) => fortran_order.replace(b).is_some(),
                _ => {
                    return Err(format!(
                        "expected 'fortran_order' to be True or False, found {raw}"
                    ))
                }
            },
            "shape" => {
                let dims = match value {
                    Lit::Seq(items) => items
                        .iter()
                        .map(|it| match it {
                            Lit::Int(v) => *v,
                            _ => None,
                        })
                        .collect::<Option<Vec<u64>>>(),
                    _ => None,
                };
                let Some(dims) = dims else {
                    return Err(format!(
                        "expected 'shape' to be {SHAPE_WANTED}, found {raw}"
                    ));
                };
                shape.replace(dims).is_some()
            }
            other => {
                return Err(format!(
                    "expected only the keys {KEYS}, found key {other:?}"
                ))
            }
        };
        if slot_taken {
            return Err(format!("key {key:?} appears twice"));
        }
        p.skip_ws();
        match p.peek() {
            Some(b',') => p.pos += 1,
            Some(b'}') => {}
            _ => {
                return Err(format!(
                    "expected ',' or '}}' in the dictionary, found {}",
                    p.found()
                ))
            }
        }
    }
    p.skip_ws();
    if p.pos != p.bytes.len() {
        return Err(format!(
            "expected only whitespace after the dictionary, found {}",
            p.found()
        ));
    }
    let missing: Vec<&str> = [
        ("descr", descr.is_none()),
        ("fortran_order", fortran_order.is_none()),
        ("shape", shape.is_none()),
    ]
    .iter()
    .filter(|(_, m)| *m)
    .map(|(k, _)| *k)
    .collect();
    match (descr, fortran_order, shape) {
        (Some(descr), Some(fortran_order), Some(shape)) => Ok(HeaderDict {
            descr,
            fortran_order,
            shape,
        }),
        _ => Err(format!(
            "expected the keys {KEYS}, missing {}",
            missing.join(", ")
        )),
    }
}

impl Parser<'_> {
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn skip_ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.pos += 1;
        }
    }

    /// A short quotation of the input at the current position, for messages.
    fn found(&self) -> String {
        if self.pos >= self.bytes.len() {
            return "the end of the header".into();
        }
        let rest = &self.src[self.pos..];
        let snippet: String = rest.chars().take(20).collect();
        let ellipsis = if snippet.len() < rest.len() {
            "..."
        } else {
            ""
        };
        format!("{snippet:?}{ellipsis} at offset {}", self.pos)
    }

    fn expect(&mut self, c: u8) -> Result<(), String> {
        self.skip_ws();
        if self.peek() == Some(c) {
            self.pos += 1;
            Ok(())
        } else {
            Err(format!("expected '{}', found {}", c as char, self.found()))
        }
    }

    fn value(&mut self) -> Result<Lit, String> {
        self.skip_ws();
        match self.peek() {
            Some(q @ (b'\'' | b'"')) => self.string(q),
            Some(b'(') => self.seq(b')'),
            Some(b'[') => self.seq(b']'),
            Some(b'{') => self.dict(),
            Some(b'-' | b'+' | b'0'..=b'9') => self.int(),
            Some(b'A'..=b'Z' | b'a'..=b'z' | b'_') => {
                let start = self.pos;
                while matches!(
                    self.peek(),
                    Some(b'A'..=b'Z' | b'a'..=b'z' | b'_' | b'0'..=b'9')
                ) {
                    self.pos += 1;
                }
                match &self.src[start..self.pos] {
                    "True" => Ok(Lit::Bool(true)),
                    "False" => Ok(Lit::Bool(false)),
                    "None" => Ok(Lit::Null),
                    _ => {
                        self.pos = start;
                        Err(format!("expected a Python literal, found {}", self.found()))
                    }
                }
            }
            _ => Err(format!("expected a Python literal, found {}", self.found())),
        }
    }

    fn enter(&mut self) -> Result<(), String> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(format!(
                "expected at most {MAX_DEPTH} levels of nested brackets, found more at offset {}",
                self.pos
            ));
        }
        Ok(())
    }

    fn seq(&mut self, close: u8) -> Result<Lit, String> {
        self.enter()?;
        self.pos += 1;
        let mut items = Vec::new();
        loop {
            self.skip_ws();
            if self.peek() == Some(close) {
                self.pos += 1;
                break;
            }
            items.push(self.value()?);
            self.skip_ws();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(c) if c == close => {}
                _ => {
                    return Err(format!(
                        "expected ',' or '{}', found {}",
                        close as char,
                        self.found()
                    ))
                }
            }
        }
        self.depth -= 1;
        Ok(Lit::Seq(items))
    }

    fn dict(&mut self) -> Result<Lit, String> {
        self.enter()?;
        self.pos += 1;
        let mut items = Vec::new();
        loop {
            self.skip_ws();
            if self.peek() == Some(b'}') {
                self.pos += 1;
                break;
            }
            let k = self.value()?;
            self.expect(b':')?;
            let v = self.value()?;
            items.push((k, v));
            self.skip_ws();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b'}') => {}
                _ => return Err(format!("expected ',' or '}}', found {}", self.found())),
            }
        }
        self.depth -= 1;
        Ok(Lit::Dict(items))
    }

    fn int(&mut self) -> Result<Lit, String> {
        let start = self.pos;
        let mut negative = false;
        while let Some(c @ (b'-' | b'+')) = self.peek() {
            negative ^= c == b'-';
            self.pos += 1;
            self.skip_ws();
        }
        let digits_start = self.pos;
        let mut value: Option<u64> = Some(0);
        while let Some(c @ b'0'..=b'9') = self.peek() {
            value = value
                .and_then(|v| v.checked_mul(10))
                .and_then(|v| v.checked_add(u64::from(c - b'0')));
            self.pos += 1;
        }
        if self.pos == digits_start {
            self.pos = start;
            return Err(format!("expected an integer, found {}", self.found()));
        }
        // Python 2 era files may write long integers as `3L`.
        if matches!(self.peek(), Some(b'L' | b'l')) {
            self.pos += 1;
        }
        if matches!(
            self.peek(),
            Some(b'.' | b'e' | b'E' | b'j' | b'J' | b'x' | b'_')
        ) {
            self.pos = start;
            return Err(format!("expected an integer, found {}", self.found()));
        }
        if negative && value != Some(0) {
            value = None;
        }
        Ok(Lit::Int(value))
    }

    fn string(&mut self, quote: u8) -> Result<Lit, String> {
        let start = self.pos;
        self.pos += 1;
        let mut out = String::new();
        loop {
            let rest = &self.src[self.pos..];
            let Some(c) = rest.chars().next() else {
                self.pos = start;
                return Err(format!(
                    "expected a closing quote for the string at offset {start}"
                ));
            };
            self.pos += c.len_utf8();
            match c {
                '\n' => {
                    self.pos = start;
                    return Err(format!(
                        "expected a closing quote for the string at offset {start}"
                    ));
                }
                '\\' => {
                    let Some(e) = self.src[self.pos..].chars().next() else {
                        continue;
                    };
                    self.pos += e.len_utf8();
                    match e {
                        'n' => out.push('\n'),
                        't' => out.push('\t'),
                        'r' => out.push('\r'),
                        '0' => out.push('\0'),
                        '\\' | '\'' | '"' => out.push(e),
                        other => {
                            out.push('\\');
                            out.push(other);
                        }
                    }
                }
                c if c as u32 == u32::from(quote) => break,
                c => out.push(c),
            }
        }
        Ok(Lit::Str(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_numpy_headers() {
        let h = parse_header_dict(
            "{'descr': '<f4', 'fortran_order': False, 'shape': (64, 784), }          \n",
        )
        .unwrap();
        assert_eq!(
            h,
            HeaderDict {
                descr: Descr::TypeStr("<f4".into()),
                fortran_order: false,
                shape: vec![64, 784]
            }
        );
        let h = parse_header_dict("{\"shape\": (), \"fortran_order\": True, \"descr\": '|b1'}")
            .unwrap();
        assert!(h.fortran_order);
        assert!(h.shape.is_empty());
        let h =
            parse_header_dict("{'descr': '<i8', 'fortran_order': False, 'shape': (3L,)}").unwrap();
        assert_eq!(h.shape, vec![3]);
    }

    #[test]
    fn structured_descr_is_kept_as_text() {
        let h = parse_header_dict(
            "{'descr': [('a', '<f4'), ('b', '<i4', (2,))], 'fortran_order': False, 'shape': (2,)}",
        )
        .unwrap();
        assert_eq!(
            h.descr,
            Descr::Other("[('a', '<f4'), ('b', '<i4', (2,))]".into())
        );
    }

    #[test]
    fn rejects_bad_headers() {
        let cases = [
            ("", "expected a dictionary literal"),
            ("{'descr': '<f4', 'fortran_order': False}", "missing shape"),
            (
                "{'descr': '<f4', 'fortran_order': False, 'shape': (-1,)}",
                "non-negative integers, found (-1,)",
            ),
            (
                "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,)}",
                "non-negative integers",
            ),
            (
                "{'descr': '<f4', 'fortran_order': 0, 'shape': ()}",
                "True or False, found 0",
            ),
            ("{'descr': '<f4', 'descr': '<f4'}", "appears twice"),
            ("{'descr': '<f4', 'foo': 1}", "found key \"foo\""),
            ("{'descr': '<f4 ", "closing quote"),
            (
                "{'descr': '<f4', 'fortran_order': False, 'shape': ()} x",
                "only whitespace",
            ),
            (
                "{'a': ((((((((((((((((((1))))))))))))))))))}",
                "levels of nested brackets",
            ),
        ];
        for (text, want) in cases {
            let err = parse_header_dict(text).unwrap_err();
            assert!(err.contains(want), "{text:?}: {err:?} lacks {want:?}");
        }
        let deep = format!("{{'descr': {}", "[".repeat(100_000));
        assert!(parse_header_dict(&deep).is_err());
    }
}
