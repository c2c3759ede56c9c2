//! `tapc lsp` against a hostile or careless client (issue 23 items 8-10): oversized and
//! malformed frames, bodies that are not JSON-RPC, ids of every size and type, a `didClose`
//! of a document never opened, and inputs that took quadratic time. The real binary, over
//! stdio; each test ends with a request that must still be answered.

use crate::lsp_client;

use lsp_client::Client;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

const URI: &str = "file:///tmp/tapc-lsp-hardening/m.teg";
const WAIT: Duration = Duration::from_secs(60);

fn started() -> Client {
    let mut c = Client::start(&[]);
    c.initialize();
    c
}

/// The server still answers: a documentSymbol request of a document never opened is `null`.
fn still_answers(c: &mut Client) {
    let r = c.request(
        "textDocument/documentSymbol",
        json!({"textDocument": {"uri": URI}}),
    );
    assert!(r.is_null(), "{r}");
}

/// The CPU time the process has used (all its threads): unlike wall time, what a loaded
/// machine does not inflate.
fn cpu_time(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let fields: Vec<&str> = stat[stat.rfind(')').unwrap() + 2..].split(' ').collect();
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    // SAFETY: sysconf has no preconditions.
    let per_sec = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    Duration::from_secs_f64(ticks as f64 / per_sec)
}

/// Waits up to a minute for `needle` in the server's stderr (read by another thread).
fn logged(c: &Client, needle: &str) -> bool {
    let deadline = Instant::now() + WAIT;
    while Instant::now() < deadline {
        if c.stderr().contains(needle) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

fn vm_hwm_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[test]
fn a_length_over_the_limit_is_skipped_without_allocating_it() {
    let mut c = started();
    let before = vm_hwm_kib(c.pid());
    // 4 GiB announced: 80 MiB of it sent, then the input ends inside the message.
    c.send_raw(b"Content-Length: 4294967296\r\n\r\n");
    let chunk = vec![b' '; 1 << 20];
    for _ in 0..80 {
        c.send_raw(&chunk);
    }
    let grown = vm_hwm_kib(c.pid()) - before;
    assert!(grown < 32 << 10, "the peak RSS grew by {grown} KiB");
    assert_eq!(c.wait_exit(), Some(1));

    // Just over the limit (64 MiB + 1), sent in full: skipped, reported, and the session goes on.
    let mut c = started();
    let n = (64 << 20) + 1;
    c.send_raw(format!("Content-Length: {n}\r\n\r\n").as_bytes());
    let mut left = n;
    while left > 0 {
        let k = left.min(chunk.len());
        c.send_raw(&chunk[..k]);
        left -= k;
    }
    still_answers(&mut c);
    assert!(
        logged(&c, "over the limit of 67108864 (64 MiB)"),
        "{}",
        c.stderr()
    );
    assert_eq!(c.shutdown(), Some(0));

    // 2^62 (it aborted the server): the rest of the input is read past; the server exits 1.
    let mut c = started();
    c.send_raw(b"Content-Length: 4611686018427387904\r\n\r\n{}");
    assert_eq!(c.wait_exit(), Some(1));
}

#[test]
fn framing_and_json_errors_are_answered_or_logged_and_the_session_goes_on() {
    let mut c = started();
    let null = Value::Null;
    // Not JSON, invalid UTF-8, a batch, a scalar: each answered with id null.
    for (body, code) in [
        (&b"{not json"[..], -32700),
        (
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\xff\"}",
            -32700,
        ),
        (
            b"[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"shutdown\"}]",
            -32600,
        ),
        (b"42", -32600),
        (
            b"{\"jsonrpc\":\"2.0\",\"id\":null,\"method\":\"textDocument/hover\"}",
            -32600,
        ),
    ] {
        let mut frame = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
        frame.extend_from_slice(body);
        c.send_raw(&frame);
        let r = c.response(&null, WAIT).expect("an answer with id null");
        assert_eq!(r["error"]["code"], code, "{r}");
    }
    // A method that is not a string, with an id: answered with that id.
    let body = r#"{"jsonrpc":"2.0","id":7,"method":5}"#;
    c.send_raw(format!("Content-Length: {}\r\n\r\n{body}", body.len()).as_bytes());
    let r = c.response(&json!(7), WAIT).expect("an answer with id 7");
    assert_eq!(r["error"]["code"], -32600, "{r}");
    // A bad length, a missing one, a garbage line, a header line over 8 KiB: logged; the
    // reader finds the next message.
    c.send_raw(b"garbage\r\n\r\n");
    c.send_raw(&[b'a'; 20_000]);
    c.send_raw(b"\r\n\r\n");
    c.send_raw(b"Content-Length: x\r\n\r\n{}");
    c.send_raw(b"Content-Type: text/plain\r\n\r\n{}");
    still_answers(&mut c);
    assert!(logged(&c, "longer than"), "{}", c.stderr());
    let log = c.stderr();
    for want in [
        "not JSON",
        "batches are not part of the LSP",
        "a bad Content-Length \"x\"",
        "2 bytes that are no header",
        "the header line \"garbage\"",
        "the header line \"{}Content-Type: text/plain\"",
        "a header line longer than 8192 bytes",
    ] {
        assert!(log.contains(want), "{want:?} not logged:\n{log}");
    }
    assert_eq!(c.shutdown(), Some(0));
}

#[test]
fn requests_with_ids_of_any_number_or_string_are_answered_with_that_id() {
    let mut c = started();
    for id in [
        json!(2147483647),
        json!(2147483648u64),
        json!(-2147483649i64),
        json!(9007199254740993u64),
        json!(u64::MAX),
        json!(1.5),
        json!(1e300),
        json!(""),
        json!("\u{1}n5"),
    ] {
        let params = json!({"textDocument": {"uri": URI}});
        let r = c.request_with_id(id.clone(), "textDocument/documentSymbol", params, WAIT);
        let r = r.unwrap_or_else(|| panic!("no answer to id {id}"));
        assert!(
            r["result"].is_null() && r.get("error").is_none(),
            "{id}: {r}"
        );
    }
    assert_eq!(c.shutdown(), Some(0));
}

#[test]
fn did_close_of_a_document_never_opened_publishes_nothing() {
    let mut c = started();
    let never = "file:///tmp/tapc-lsp-hardening/never.teg";
    c.notify(
        "textDocument/didClose",
        json!({"textDocument": {"uri": never}}),
    );
    // Diagnostics are published before a request is answered: none came for `never`.
    still_answers(&mut c);
    let published: Vec<&Value> = c
        .notifications
        .iter()
        .filter(|m| m["method"] == "textDocument/publishDiagnostics")
        .collect();
    assert!(published.is_empty(), "{published:?}");
    // Open then close: the diagnostics are cleared (an empty list).
    c.open(URI, "graph @g {\n  %x = nope\n}\n");
    assert!(!c.diagnostics(URI, 1).is_empty());
    c.notify(
        "textDocument/didClose",
        json!({"textDocument": {"uri": URI}}),
    );
    still_answers(&mut c);
    let cleared = c.notifications.iter().any(|m| {
        m["method"] == "textDocument/publishDiagnostics"
            && m["params"]["uri"] == URI
            && m["params"]["diagnostics"] == json!([])
    });
    assert!(cleared, "{:?}", c.notifications);
    assert_eq!(c.shutdown(), Some(0));
}

/// A file of `n` graphs statements: `%vK = apply @id(%vK-1)` with the type inferred.
fn long_file(n: usize) -> String {
    let mut s = String::from("op @id(x: f32[N]) -> (y: f32[N]) {\n  y[i] = x[i]\n}\n");
    s.push_str("graph @g {\n  %v0 = source @x : f32[4] // é\n");
    for i in 1..n {
        s.push_str(&format!("  %v{i} = apply @id(%v{}) // 𝄞\n", i - 1));
    }
    s.push_str(&format!("  sink @y %v{}\n}}\n", n - 1));
    s
}

#[test]
fn diagnostics_symbols_and_hints_of_big_files_take_linear_time() {
    let mut c = started();
    // 160,000 bad characters on one line: 18.7 s before the fix.
    let bad = format!("graph @g {{\n  {}\n}}\n", "$".repeat(160_000));
    let t = cpu_time(c.pid());
    c.open(URI, &bad);
    let d = c.diagnostics(URI, 1);
    let diagnostics = cpu_time(c.pid()) - t;
    assert!(!d.is_empty());
    // 150,000 lines: documentSymbol and inlay hints took 50 s before the fix.
    let big = long_file(150_000);
    let t = cpu_time(c.pid());
    c.notify(
        "textDocument/didChange",
        json!({"textDocument": {"uri": URI, "version": 2}, "contentChanges": [{"text": big}]}),
    );
    let syms = c.request(
        "textDocument/documentSymbol",
        json!({"textDocument": {"uri": URI}}),
    );
    let children = syms[1]["children"].as_array().unwrap();
    // %v0, source @x, %v1 ... %v149999, sink @y.
    assert_eq!(children.len(), 150_002);
    assert_eq!(children[150_000]["name"], "%v149999");
    assert_eq!(children[150_000]["detail"], "f32[4]");
    let whole =
        json!({"start": {"line": 0, "character": 0}, "end": {"line": 200000, "character": 0}});
    let hints = c.request(
        "textDocument/inlayHint",
        json!({"textDocument": {"uri": URI}, "range": whole}),
    );
    assert_eq!(hints.as_array().unwrap().len(), 149_999);
    let symbols_and_hints = cpu_time(c.pid()) - t;
    eprintln!("server CPU: diagnostics {diagnostics:?}, symbols and hints {symbols_and_hints:?}");
    // CPU time of the server, measured 3.6 s and 8.4 s (debug profile, loaded machine); the
    // bounds leave room and are still half of what the quadratic code took.
    assert!(diagnostics < Duration::from_secs(10), "{diagnostics:?}");
    assert!(
        symbols_and_hints < Duration::from_secs(25),
        "{symbols_and_hints:?}"
    );
    assert_eq!(c.shutdown(), Some(0));
}
