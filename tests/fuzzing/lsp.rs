//! The LSP fuzzer behind `tests/lsp/fuzz.rs` (a CI slice) and the `lsp` stage of
//! `benches/fuzz.rs` (≥ 100,000 cases): sessions of the real server, in-process over byte
//! streams ([`tapc::lsp::serve_streams`]), each a deterministic function of its seed.
//!
//! A case is one message (or piece of garbage) of a session, of three kinds:
//! - framing: bad, short or missing `Content-Length`, over-long header lines, garbage bytes,
//!   bodies that are not UTF-8 or not JSON, and at the end of some sessions a length over the
//!   64 MiB limit (up to 2^62) that swallows the rest of the input;
//! - JSON shape: requests and notifications of every method with params of the wrong shape,
//!   ids of every JSON type and size, batches, scalars, responses, non-string methods;
//! - positions: every request that takes a position or range, and incremental edits, at
//!   random lines and columns (past line ends, inside surrogate pairs, up to `u32::MAX`) of
//!   documents with 1- to 4-byte characters.
//!
//! A finding: a thread of the server panics; a request with a number or string id that was
//! framed right is not answered exactly once; an answer or log reports an internal error (a
//! handler's caught panic); output that is not framed JSON; or a wrong exit code.

use serde_json::{json, Value};
use std::io::Write;
use std::sync::{Arc, Mutex};

use crate::common::Rng;

fn pick<'a, T>(rng: &mut Rng, xs: &'a [T]) -> &'a T {
    &xs[rng.below(xs.len())]
}

const URIS: &[&str] = &[
    "file:///f/a.teg",
    "file:///f/b%20c.teg",
    "untitled:x",
    "file:///never",
];

const METHODS: &[&str] = &[
    "textDocument/hover",
    "textDocument/hover",
    "textDocument/definition",
    "textDocument/definition",
    "textDocument/references",
    "textDocument/references",
    "textDocument/inlayHint",
    "textDocument/codeAction",
    "textDocument/documentSymbol",
    "textDocument/formatting",
    "textDocument/codeAction",
    "textDocument/inlayHint",
    "textDocument/didOpen",
    "textDocument/didChange",
    "textDocument/didChange",
    "textDocument/didClose",
    "initialize",
    "initialized",
    "$/cancelRequest",
    "workspace/symbol",
    "",
];

const TEXTS: &[&str] = &[
    "op @relu(x: f32[..S]) -> (y: f32[..S]) {\n  y[..i] = max(x[..i], 0.0)\n}\n\
     graph @g {\n  %x = source @x : f32[4]\n  %y = apply @relu(%x) // é𝄞\n  sink @out %y\n}\n",
    "graph @g {\n  %x = source @x : f32[2, 3]\n  %t = transpose %x [1, 0]\n  sink @t %t\n}\n",
    "// 中文 𝄞𝄞\ngraph @h {\n  %a = source @a : f64[8]\n  %b = apply @nope(%a)\n",
    "",
    "\r\n\u{feff}𝄞\t%x = = @[0:2]\n",
];

/// What a session sent: its bytes, the ids its well-framed requests must be answered with,
/// and whether it ends with `shutdown` and `exit` (exit code 0) or not (1).
pub struct Session {
    pub input: Vec<u8>,
    pub expect: Vec<Value>,
    pub cases: u64,
    pub clean_exit: bool,
}

fn frame(body: &[u8]) -> Vec<u8> {
    let mut out = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
    out.extend_from_slice(body);
    out
}

/// A random id: a small or large integer, a float or a string (`k` makes it unique).
fn id(rng: &mut Rng, k: u64) -> Value {
    match rng.below(6) {
        0 | 1 => json!(k),
        2 => json!(k + (1 << 31)),
        3 => json!(u64::MAX - k),
        4 => json!(k as f64 + 0.5),
        _ => json!(format!("id-{k}")),
    }
}

fn position(rng: &mut Rng) -> Value {
    let pick = |rng: &mut Rng, near: usize| match rng.below(10) {
        0 => u32::MAX as u64,
        1 => rng.below(1 << 31) as u64,
        _ => rng.below(near) as u64,
    };
    json!({"line": pick(rng, 9), "character": pick(rng, 40)})
}

fn range(rng: &mut Rng) -> Value {
    json!({"start": position(rng), "end": position(rng)})
}

/// Params of the right shape for `method`, at random positions.
fn params(rng: &mut Rng, method: &str) -> Value {
    let doc = json!({"uri": pick(rng, URIS)});
    match method {
        "textDocument/didOpen" => json!({"textDocument": {
            "uri": pick(rng, URIS), "languageId": "teg", "version": rng.below(100),
            "text": pick(rng, TEXTS)}}),
        "textDocument/didChange" => {
            let text = pick(rng, TEXTS)[..]
                .chars()
                .take(rng.below(40))
                .collect::<String>();
            let change = match rng.below(4) {
                0 => json!({ "text": text }),
                _ => json!({"range": range(rng), "text": text}),
            };
            json!({"textDocument": {"uri": pick(rng, URIS), "version": rng.below(100)},
                   "contentChanges": [change]})
        }
        "textDocument/didClose" | "textDocument/documentSymbol" => json!({ "textDocument": doc }),
        "textDocument/formatting" => {
            json!({"textDocument": doc, "options": {"tabSize": 2, "insertSpaces": true}})
        }
        "textDocument/codeAction" => json!({"textDocument": doc, "range": range(rng),
            "context": {"diagnostics": []}}),
        "textDocument/inlayHint" => json!({"textDocument": doc, "range": range(rng)}),
        "textDocument/references" => json!({"textDocument": doc, "position": position(rng),
            "context": {"includeDeclaration": rng.below(2) == 0}}),
        _ => json!({"textDocument": doc, "position": position(rng)}),
    }
}

/// `v` with one random part replaced by a value of another shape.
fn mangle(rng: &mut Rng, v: &mut Value) {
    let odd = [
        json!(null),
        json!(-1),
        json!(1e300),
        json!(18446744073709551615u64),
        json!("𝄞"),
        json!([]),
        json!({}),
        json!(true),
    ];
    match v {
        Value::Object(m) if !m.is_empty() && rng.below(3) > 0 => {
            let k = m.keys().nth(rng.below(m.len())).unwrap().clone();
            if rng.below(4) == 0 {
                m.remove(&k);
            } else {
                mangle(rng, m.get_mut(&k).unwrap());
            }
        }
        Value::Array(a) if !a.is_empty() && rng.below(3) > 0 => {
            let i = rng.below(a.len());
            mangle(rng, &mut a[i]);
        }
        _ => *v = pick(rng, &odd).clone(),
    }
}

/// A framing case: bytes that are not one well-framed message, and leave the stream in step.
fn framing(rng: &mut Rng, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    match rng.below(7) {
        0 => {
            let bad = pick(
                rng,
                &[
                    "x",
                    "-1",
                    "",
                    "+3",
                    "99999999999999999999999",
                    "0x10",
                    " 1 2",
                ],
            );
            out.extend_from_slice(format!("Content-Length: {bad}\r\n\r\n").as_bytes());
            out.extend_from_slice(body);
        }
        1 => {
            let n = rng.below(body.len());
            out.extend_from_slice(format!("Content-Length: {n}\r\n\r\n").as_bytes());
            out.extend_from_slice(body);
        }
        2 => {
            out.extend_from_slice(b"Content-Type: application/vscode-jsonrpc\r\n\r\n");
            out.extend_from_slice(body);
        }
        3 => {
            out.resize(9000 + rng.below(9000), b'a');
            out.extend_from_slice(b"\r\n\r\n");
        }
        4 => out.extend((0..rng.below(64)).map(|_| (rng.next() % 256) as u8 & !b'\n')),
        5 => {
            let mut bad = body.to_vec();
            let i = rng.below(bad.len());
            bad.insert(i, 0xff);
            out = frame(&bad);
        }
        _ => out = frame(&body[..rng.below(body.len())]),
    }
    out
}

/// One session of `cases` cases after `initialize`.
pub fn session(seed: u64, cases: u64) -> Session {
    let mut rng = Rng(seed | 1);
    let mut input = Vec::new();
    let mut expect = Vec::new();
    let mut k = 0u64;
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"capabilities": {}}});
    input.extend(frame(init.to_string().as_bytes()));
    expect.push(json!(0));
    for uri in &URIS[..3] {
        let doc =
            json!({"uri": uri, "languageId": "teg", "version": 0, "text": pick(&mut rng, TEXTS)});
        let open = json!({"jsonrpc": "2.0", "method": "textDocument/didOpen",
            "params": {"textDocument": doc}});
        input.extend(frame(open.to_string().as_bytes()));
    }
    for _ in 0..cases {
        k += 1;
        let method = *pick(&mut rng, METHODS);
        let mut params = params(&mut rng, method);
        let notification = method.contains("/did") || method == "initialized";
        let kind = rng.below(10);
        if (4..6).contains(&kind) {
            mangle(&mut rng, &mut params);
        }
        let mut msg = json!({"jsonrpc": "2.0", "method": method, "params": params});
        let mut answered = !notification;
        if !notification || kind == 6 {
            let id = id(&mut rng, k);
            msg["id"] = id;
            answered = true;
        }
        if kind == 7 {
            let (key, odd) = match rng.below(4) {
                0 => ("method", json!(5)),
                1 => ("id", json!(null)),
                2 => ("id", json!({"a": 1})),
                _ => ("result", json!(1)),
            };
            // A bad method is answered with the id; a bad id with id null.
            answered &= key != "id";
            msg[key] = odd;
        }
        let body = match kind {
            8 => json!([msg]).to_string(),
            _ => msg.to_string(),
        };
        if kind == 8 || kind == 9 {
            answered = false;
        }
        if kind == 9 {
            input.extend(framing(&mut rng, body.as_bytes()));
        } else {
            input.extend(frame(body.as_bytes()));
        }
        if answered {
            expect.push(msg["id"].clone());
        }
    }
    let clean_exit = rng.below(8) > 0;
    if clean_exit {
        let id = json!(u64::MAX);
        let shutdown = json!({"jsonrpc": "2.0", "id": id, "method": "shutdown"});
        input.extend(frame(shutdown.to_string().as_bytes()));
        expect.push(id);
        input.extend(frame(br#"{"jsonrpc":"2.0","method":"exit"}"#));
    } else {
        let huge = pick(&mut rng, &["4611686018427387904", "4294967296", "67108865"]);
        input.extend(format!("Content-Length: {huge}\r\n\r\n{{}}").as_bytes());
    }
    Session {
        input,
        expect,
        cases: cases + 2,
        clean_exit,
    }
}

/// A `Write` that keeps what is written, shared with the caller.
#[derive(Clone, Default)]
struct Shared(Arc<Mutex<Vec<u8>>>);

impl Write for Shared {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The messages of a server's output, or why it is not framed JSON.
fn messages(mut out: &[u8]) -> Result<Vec<Value>, String> {
    let mut msgs = Vec::new();
    while !out.is_empty() {
        let end = (out.windows(4).position(|w| w == b"\r\n\r\n")).ok_or("a header without end")?;
        let header = std::str::from_utf8(&out[..end]).map_err(|e| e.to_string())?;
        let n: usize = (header
            .strip_prefix("Content-Length: ")
            .and_then(|n| n.parse().ok()))
        .ok_or_else(|| format!("bad header {header:?}"))?;
        let body = out.get(end + 4..end + 4 + n).ok_or("a short body")?;
        msgs.push(serde_json::from_slice(body).map_err(|e| format!("not JSON: {e}"))?);
        out = &out[end + 4 + n..];
    }
    Ok(msgs)
}

/// What a session did: its cases, the answers with a (non-null) result and with an error,
/// and the lines of the log (framing and JSON errors).
#[derive(Default, Debug, Clone, Copy)]
pub struct Outcome {
    pub cases: u64,
    pub results: u64,
    pub errors: u64,
    pub logged: u64,
}

impl std::ops::AddAssign for Outcome {
    fn add_assign(&mut self, o: Outcome) {
        self.cases += o.cases;
        self.results += o.results;
        self.errors += o.errors;
        self.logged += o.logged;
    }
}

/// Runs one session on the server; `Err` describes the findings.
pub fn run(seed: u64, cases: u64) -> Result<Outcome, String> {
    let s = session(seed, cases);
    let (out, log) = (Shared::default(), Shared::default());
    let log_sink: tapc::lsp::transport::Log = Arc::new(Mutex::new(log.clone()));
    let input = std::io::Cursor::new(s.input);
    let code = tapc::lsp::serve_streams(input, out.clone(), log_sink, true)?;
    let fail = |why: String| Err(format!("seed {seed:#x}: {why}"));
    let want_code = if s.clean_exit { 0 } else { 1 };
    if code != want_code {
        return fail(format!("exit code {code}, expected {want_code}"));
    }
    let log = String::from_utf8_lossy(&log.0.lock().unwrap()).into_owned();
    if let Some(line) = log.lines().find(|l| l.contains("internal error")) {
        return fail(line.to_string());
    }
    let msgs = match messages(&out.0.lock().unwrap()) {
        Ok(msgs) => msgs,
        Err(e) => return fail(e),
    };
    let mut answers: Vec<String> = Vec::new();
    let mut outcome = Outcome {
        cases: s.cases,
        logged: log.lines().count() as u64,
        ..Outcome::default()
    };
    for m in &msgs {
        if m.get("method").is_some() {
            let text = m["params"]["message"].as_str().unwrap_or("");
            if text.contains("internal error") {
                return fail(text.to_string());
            }
            continue;
        }
        if m["error"]["code"] == json!(-32603) {
            return fail(format!("internal error answered: {m}"));
        }
        outcome.errors += u64::from(m.get("error").is_some());
        outcome.results += u64::from(!m["result"].is_null());
        if !m["id"].is_null() {
            answers.push(m["id"].to_string());
        }
    }
    // Replies to unreadable requests may overtake answers: compared as multisets.
    let mut expect: Vec<String> = s.expect.iter().map(Value::to_string).collect();
    answers.sort();
    expect.sort();
    if answers != expect {
        let missing: Vec<&String> = expect.iter().filter(|e| !answers.contains(e)).collect();
        let extra: Vec<&String> = answers.iter().filter(|a| !expect.contains(a)).collect();
        return fail(format!(
            "{} answers to {} requests; unanswered {missing:?}, unexpected {extra:?}",
            answers.len(),
            expect.len()
        ));
    }
    Ok(outcome)
}
