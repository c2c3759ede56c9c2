//! A burst of edits over stdio: 50 `didChange` notifications written to the server at once are
//! coalesced (fewer compilations than edits, counted by the `tapc/stats` request), nothing
//! stale is published, and the diagnostics published last are those of the final text. And a
//! compilation that an edit arriving while it runs makes stale is not published (the test hook
//! `TAPC_LSP_TEST_SLOW_COMPILE_MS` makes each compilation slow enough to send one).

use crate::lsp::started;
use serde_json::{json, Value};

const URI: &str = "file:///tmp/tapc-lsp-test/burst.teg";

const BASE: &str = "\
op @id(x: f32[N]) -> (y: f32[N]) {
  y[i] = x[i]
}
graph @g {
  %a = zeros : f32[2]
  %b = apply @id(%a)
  sink @out %b
}
";

/// Version `version` of the document: the sink reads `%{name}`.
fn change(version: i64, name: &str) -> Vec<u8> {
    let text = BASE.replace("sink @out %b", &format!("sink @out %{name}"));
    let msg = json!({"jsonrpc": "2.0", "method": "textDocument/didChange", "params": {
        "textDocument": {"uri": URI, "version": version},
        "contentChanges": [{"text": text}]}});
    let body = msg.to_string();
    format!("Content-Length: {}\r\n\r\n{body}", body.len()).into_bytes()
}

/// The versions of the `publishDiagnostics` notifications received for the document.
fn published(notifications: &[Value]) -> Vec<i64> {
    notifications
        .iter()
        .filter(|m| m["method"] == "textDocument/publishDiagnostics")
        .filter(|m| m["params"]["uri"] == URI)
        .map(|m| m["params"]["version"].as_i64().unwrap())
        .collect()
}

#[test]
fn a_burst_of_edits_is_compiled_once_and_only_the_last_text_is_published() {
    let mut c = started();
    c.open(URI, BASE);
    assert!(c.diagnostics(URI, 1).is_empty());
    let before = c.request("tapc/stats", Value::Null);
    assert_eq!(before["compiles"], 1, "{before}");
    // Versions 2..=50 read `%v2`..`%v50`; version 51, the last, reads `%last`.
    let mut burst: Vec<u8> = (2..=50).flat_map(|v| change(v, &format!("v{v}"))).collect();
    burst.extend(change(51, "last"));
    c.send_raw(&burst);
    let d = c.diagnostics(URI, 51);
    assert_eq!(d.len(), 1, "{d:?}");
    assert_eq!(d[0]["code"], "E0011");
    let msg = d[0]["message"].as_str().unwrap();
    assert!(msg.contains("`%last` is not defined"), "{msg}");
    // Wait out the debounce: nothing else is compiled or published afterwards.
    std::thread::sleep(2 * tapc::lsp::DEBOUNCE);
    let stats = c.request("tapc/stats", Value::Null);
    let compiles = stats["compiles"].as_u64().unwrap() - 1;
    println!("50 edits in one burst: {compiles} compilation(s), stats {stats}");
    assert!(compiles >= 1, "{stats}");
    assert!(
        compiles < 50,
        "50 edits cost {compiles} compilations: {stats}"
    );
    // Publications other than those of versions 1 and 51 (taken above): all of older texts,
    // in order, and none after the last text's.
    let others = published(&c.notifications);
    assert!(others.iter().all(|&v| v < 51), "published {others:?}");
    assert!(
        others.windows(2).all(|w| w[0] < w[1]),
        "out of order: {others:?}"
    );
    // Every compilation was published or superseded, and every publication came.
    let published_n = stats["published"].as_u64().unwrap();
    let superseded = stats["superseded"].as_u64().unwrap();
    assert_eq!(published_n + superseded, compiles + 1, "{stats}");
    assert_eq!(published_n as usize, others.len() + 2, "{stats} {others:?}");
    assert_eq!(c.shutdown(), Some(0));
}

#[test]
fn a_compilation_made_stale_by_an_edit_is_not_published() {
    // Each compilation takes 2 s, so the edit sent 0.3 s after the one being compiled arrives
    // while it runs.
    let mut c = crate::lsp_client::Client::start(&[("TAPC_LSP_TEST_SLOW_COMPILE_MS", "2000")]);
    c.initialize();
    c.open(URI, BASE);
    assert!(c.diagnostics(URI, 1).is_empty());
    c.send_raw(&change(2, "stale"));
    std::thread::sleep(std::time::Duration::from_millis(300));
    c.send_raw(&change(3, "last"));
    let d = c.diagnostics(URI, 3);
    assert_eq!(d.len(), 1, "{d:?}");
    assert!(
        d[0]["message"].as_str().unwrap().contains("`%last`"),
        "{d:?}"
    );
    let stats = c.request("tapc/stats", Value::Null);
    assert_eq!(
        stats,
        json!({"compiles": 3, "published": 2, "superseded": 1}),
        "{stats}"
    );
    // Version 2 was compiled but never published.
    assert_eq!(published(&c.notifications), Vec::<i64>::new());
    assert_eq!(c.shutdown(), Some(0));
}
