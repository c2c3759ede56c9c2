//! No input, however malformed, panics the compiler: thousands of mutated and random inputs
//! go through parse, lower, verify and (when clean) the interpreter and printer.

mod common;
use std::collections::HashMap;

/// A small deterministic generator (xorshift) so failures reproduce.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

const PIECES: &[&str] = &[
    "%x",
    "@f",
    "[",
    "]",
    "(",
    ")",
    "{",
    "}",
    ",",
    ":",
    "=",
    "\n",
    "..",
    "-",
    "+",
    "*",
    "/",
    "%",
    "0",
    "-1",
    "2.5",
    "sum",
    "max",
    "apply",
    "source",
    "sink",
    "op",
    "graph",
    "extern",
    "index",
    "cost",
    "sequence",
    "->",
    "on",
    "@[0:2]",
    "f32",
    "i64[3]",
    "slice",
    "reshape",
    "[0:1:-1]",
    "axis",
    "99999999999999999999",
    "é",
    "$",
    "\u{0}",
];

fn mutate(src: &str, rng: &mut Rng) -> String {
    let mut chars: Vec<char> = src.chars().collect();
    for _ in 0..1 + rng.below(4) {
        let at = rng.below(chars.len() + 1);
        match rng.below(4) {
            0 if !chars.is_empty() => {
                let end = (at + rng.below(12)).min(chars.len());
                chars.drain(at.min(end)..end);
            }
            1 => {
                let p = PIECES[rng.below(PIECES.len())];
                chars.splice(at..at, p.chars());
            }
            2 if chars.len() > 1 => {
                let j = rng.below(chars.len());
                let i = at.min(chars.len() - 1);
                chars.swap(i, j);
            }
            _ => {
                let b = chars.len().min(at + rng.below(30));
                let dup: Vec<char> = chars[at.min(b)..b].to_vec();
                chars.splice(at..at, dup);
            }
        }
    }
    chars.into_iter().collect()
}

fn exercise(src: &str) {
    let (m, facts, diags) = tapc::compile_source(src);
    for d in &diags.0 {
        for l in &d.labels {
            assert!(
                l.span.end as usize <= src.len() + 1,
                "label past the end for input {src:?}"
            );
        }
    }
    let _ = tapc::diag::render_human("fuzz.teg", src, &diags.0, false);
    let _ = tapc::diag::render_json("fuzz.teg", src, &diags.0);
    if !diags.has_errors() {
        let printed = tapc::syntax::printer::print_module(&m);
        let (m2, _, d2) = tapc::compile_source(&printed);
        assert!(
            !d2.has_errors(),
            "printed form of a clean input has errors: {printed}"
        );
        assert_eq!(m, m2);
        for (g, f) in m.graphs.iter().zip(&facts) {
            // Generators only, and small: sources have no bindings, which must be an error, not a panic.
            if g.values
                .iter()
                .all(|v| v.ty.as_ref().is_some_and(|t| t.elements() < 4096))
            {
                let _ = tapc::interp::run(&m, g, f, &HashMap::new());
            }
        }
    }
}

#[test]
fn mutated_examples_never_panic() {
    let seeds: Vec<String> = ["mlp.teg", "conv.teg", "softmax.teg", "attention.teg"]
        .iter()
        .map(|n| common::example(n))
        .collect();
    let mut rng = Rng(0x5eed_1234_abcd_0001);
    for i in 0..3000 {
        let base = &seeds[i % seeds.len()];
        let src = mutate(base, &mut rng);
        exercise(&src);
    }
}

#[test]
fn random_token_soup_never_panics() {
    let mut rng = Rng(0xdead_beef_0000_0042);
    for _ in 0..2000 {
        let n = rng.below(40);
        let src: String = (0..n)
            .map(|_| PIECES[rng.below(PIECES.len())])
            .collect::<Vec<_>>()
            .join(" ");
        exercise(&src);
    }
}
