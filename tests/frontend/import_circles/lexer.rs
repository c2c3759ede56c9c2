//! Just enough of a Rust tokenizer to read a file's module structure: identifiers, `::`,
//! string literals (for `#[path = "..."]`) and single punctuation characters, each with its
//! line. Comments, char and number literals are dropped, so that text inside them is never
//! taken for a path.

/// One token and the 1-based line it starts on.
#[derive(Clone, Debug, PartialEq)]
pub struct Token {
    pub line: usize,
    pub kind: Kind,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Kind {
    Ident(String),
    /// A string literal's text, escapes left as written.
    Str(String),
    /// `::`
    PathSep,
    Punct(char),
}

/// Tokens of `src`.
pub fn tokens(src: &str) -> Vec<Token> {
    let mut lx = Lexer {
        chars: src.chars().collect(),
        at: 0,
        line: 1,
        out: Vec::new(),
    };
    lx.run();
    lx.out
}

struct Lexer {
    chars: Vec<char>,
    at: usize,
    line: usize,
    out: Vec<Token>,
}

impl Lexer {
    fn peek(&self, ahead: usize) -> Option<char> {
        self.chars.get(self.at + ahead).copied()
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.peek(0)?;
        self.at += 1;
        if c == '\n' {
            self.line += 1;
        }
        Some(c)
    }

    fn push(&mut self, line: usize, kind: Kind) {
        self.out.push(Token { line, kind });
    }

    fn run(&mut self) {
        while let Some(c) = self.peek(0) {
            let line = self.line;
            match c {
                _ if c.is_whitespace() => {
                    self.bump();
                }
                '/' if self.peek(1) == Some('/') => self.line_comment(),
                '/' if self.peek(1) == Some('*') => self.block_comment(),
                '"' => {
                    let text = self.quoted();
                    self.push(line, Kind::Str(text));
                }
                '\'' => self.quote_or_lifetime(),
                ':' if self.peek(1) == Some(':') => {
                    self.at += 2;
                    self.push(line, Kind::PathSep);
                }
                _ if c.is_ascii_digit() => self.number(),
                _ if c == '_' || c.is_alphabetic() => self.word(),
                _ => {
                    self.bump();
                    self.push(line, Kind::Punct(c));
                }
            }
        }
    }

    fn line_comment(&mut self) {
        while self.peek(0).is_some_and(|c| c != '\n') {
            self.bump();
        }
    }

    /// Block comments nest in Rust.
    fn block_comment(&mut self) {
        let mut depth = 0;
        while let Some(c) = self.bump() {
            if c == '/' && self.peek(0) == Some('*') {
                self.bump();
                depth += 1;
            } else if c == '*' && self.peek(0) == Some('/') {
                self.bump();
                depth -= 1;
                if depth == 0 {
                    return;
                }
            }
        }
    }

    /// A `"..."` literal at the cursor (escapes skipped over); returns its text.
    fn quoted(&mut self) -> String {
        self.bump();
        let mut text = String::new();
        while let Some(c) = self.bump() {
            match c {
                '"' => break,
                '\\' => {
                    text.push(c);
                    text.extend(self.bump());
                }
                _ => text.push(c),
            }
        }
        text
    }

    /// `r"..."`, `r#"..."#` (any number of `#`): the cursor is on the first `#` or `"`.
    fn raw_quoted(&mut self) -> String {
        let mut hashes = 0;
        while self.peek(0) == Some('#') {
            self.bump();
            hashes += 1;
        }
        self.bump();
        let mut text = String::new();
        while let Some(c) = self.bump() {
            let closes = c == '"' && (0..hashes).all(|k| self.peek(k) == Some('#'));
            if closes {
                self.at += hashes;
                break;
            }
            text.push(c);
        }
        text
    }

    /// A char literal (`'a'`, `'\n'`, `'{'`) is dropped; a lifetime or label leaves its name.
    fn quote_or_lifetime(&mut self) {
        self.bump();
        if self.peek(0) == Some('\\') {
            while let Some(c) = self.bump() {
                if c == '\\' {
                    self.bump();
                } else if c == '\'' {
                    return;
                }
            }
        } else if self.peek(1) == Some('\'') {
            self.at += 2;
        }
    }

    fn number(&mut self) {
        while let Some(c) = self.peek(0) {
            let fraction = c == '.' && self.peek(1).is_some_and(|d| d.is_ascii_digit());
            if !(c.is_alphanumeric() || c == '_' || fraction) {
                return;
            }
            self.bump();
        }
    }

    /// An identifier or keyword, or a prefixed literal (`b"..."`, `r#"..."#`, `b'x'`).
    fn word(&mut self) {
        let line = self.line;
        let start = self.at;
        while self
            .peek(0)
            .is_some_and(|c| c == '_' || c.is_alphanumeric())
        {
            self.bump();
        }
        let word: String = self.chars[start..self.at].iter().collect();
        let raw = matches!(word.as_str(), "r" | "br" | "cr");
        match self.peek(0) {
            Some('"') if matches!(word.as_str(), "b" | "c") => {
                let text = self.quoted();
                self.push(line, Kind::Str(text));
            }
            Some('"') if raw => {
                let text = self.raw_quoted();
                self.push(line, Kind::Str(text));
            }
            Some('#') if raw && matches!(self.peek(1), Some('"' | '#')) => {
                let text = self.raw_quoted();
                self.push(line, Kind::Str(text));
            }
            // `r#ident`: a raw identifier.
            Some('#') if word == "r" => {
                self.bump();
                self.word();
            }
            Some('\'') if word == "b" => self.quote_or_lifetime(),
            _ => self.push(line, Kind::Ident(word)),
        }
    }
}
