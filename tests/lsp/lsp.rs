//! `tapc lsp` end to end: the real binary driven over stdio by a JSON-RPC client, one session
//! per test, asserting what each request answers.

use crate::lsp_client;

use lsp_client::Client;
use serde_json::{json, Value};

const URI: &str = "file:///tmp/tapc-lsp-test/layer.teg";

const SRC: &str = "\
op @linear(x: f32[B, K], w: f32[K, N], b: f32[N]) -> (y: f32[B, N]) {
  y[i, j] = sum[k](x[i, k] * w[k, j]) + b[j]
}

op @relu(x: f32[..S]) -> (y: f32[..S]) {
  y[..i] = max(x[..i], 0.0)
}

graph @layer {
  %x = source @x : f32[8, 4]
  %w = source @w : f32[4, 3]
  %b = source @b : f32[3]
  %h = apply @linear(%x, %w, %b)
  %y = apply @relu(%h)
  sink @out %y
}
";

/// The LSP position (line, UTF-16 column; ASCII here) of the `nth` occurrence of `needle`.
pub(crate) fn pos(text: &str, needle: &str, nth: usize) -> Value {
    let at = text.match_indices(needle).nth(nth).expect(needle).0;
    let line = text[..at].matches('\n').count();
    let col = at - text[..at].rfind('\n').map_or(0, |i| i + 1);
    json!({"line": line, "character": col})
}

fn at(text: &str, needle: &str, nth: usize) -> Value {
    json!({"textDocument": {"uri": URI}, "position": pos(text, needle, nth)})
}

fn line_of(v: &Value) -> u64 {
    v["range"]["start"]["line"].as_u64().unwrap()
}

pub(crate) fn started() -> Client {
    let mut c = Client::start(&[]);
    let init = c.initialize();
    let caps = &init["capabilities"];
    for cap in [
        "hoverProvider",
        "definitionProvider",
        "referencesProvider",
        "documentSymbolProvider",
        "documentFormattingProvider",
        "codeActionProvider",
        "inlayHintProvider",
        "completionProvider",
    ] {
        assert!(caps.get(cap).is_some(), "{cap} missing from {init}");
    }
    assert_eq!(init["serverInfo"]["name"], "tapc");
    c
}

/// `tapc` in-process on `src` written to a temporary file.
fn tapc(args: &[&str], src: &str) -> String {
    let dir = std::env::temp_dir().join(format!("tapc-lsp-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    crate::common::remove_at_exit(&dir);
    let file = dir.join("layer.teg");
    std::fs::write(&file, src).unwrap();
    let mut argv: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    argv.insert(1, file.display().to_string());
    let out = tapc::driver::run(&argv);
    assert_eq!(out.code, 0, "{}", out.stderr);
    out.stdout
}

#[test]
fn hover_navigation_symbols_hints_and_formatting() {
    let mut c = started();
    c.open(URI, SRC);
    assert_eq!(c.diagnostics(URI, 1), Vec::<Value>::new());

    // A value: its type and defining statement.
    let h = c.request("textDocument/hover", at(SRC, "%h)", 0));
    let text = h["contents"]["value"].as_str().unwrap();
    assert!(text.contains("%h : f32[8, 3]"), "{text}");
    assert!(
        text.contains("%h = apply @linear(%x, %w, %b) : f32[8, 3]"),
        "{text}"
    );
    assert_eq!(line_of(&h), 13);

    // An apply: the block `tapc opt --emit signature` prints for it, verbatim.
    let h = c.request("textDocument/hover", at(SRC, "apply @linear", 0));
    let text = h["contents"]["value"].as_str().unwrap();
    let sigs = tapc(&["opt", "--emit", "signature"], SRC);
    let block: String = sigs
        .split_inclusive('\n')
        .skip_while(|l| !l.contains("%h = apply"))
        .take_while(|l| !l.contains("%y = apply"))
        .collect();
    assert!(block.contains("index [i: 8, j: 3]"), "{sigs}");
    assert!(
        text.contains(block.trim_end()),
        "{text}\n--- expected ---\n{block}"
    );
    assert!(text.contains("flops"), "{text}");

    // An op: its ports and parameters.
    let h = c.request("textDocument/hover", at(SRC, "@relu(%h)", 0));
    let text = h["contents"]["value"].as_str().unwrap();
    assert!(
        text.contains("op @relu(x: f32[..S]) -> (y: f32[..S])"),
        "{text}"
    );

    // Definition and references of a value, an op and a sink.
    let d = c.request("textDocument/definition", at(SRC, "%h)", 0));
    assert_eq!(d["uri"], URI);
    assert_eq!(d["range"]["start"], pos(SRC, "%h =", 0));
    let d = c.request("textDocument/definition", at(SRC, "@linear(%x", 0));
    assert_eq!(d["range"]["start"], pos(SRC, "@linear(x", 0));
    let mut refs = at(SRC, "%x", 1);
    refs["context"] = json!({"includeDeclaration": true});
    let r = c.request("textDocument/references", refs.clone());
    let lines: Vec<u64> = r.as_array().unwrap().iter().map(line_of).collect();
    assert_eq!(lines, [9, 12]);
    refs["context"] = json!({"includeDeclaration": false});
    let r = c.request("textDocument/references", refs);
    assert_eq!(r.as_array().unwrap().len(), 1);
    let d = c.request("textDocument/definition", at(SRC, "@out", 0));
    assert_eq!(line_of(&d), 14);

    // Symbols: ops and graphs, the graph's values, sources and sink inside.
    let s = c.request(
        "textDocument/documentSymbol",
        json!({"textDocument": {"uri": URI}}),
    );
    let names: Vec<&str> = s
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["op @linear", "op @relu", "graph @layer"]);
    let children: Vec<(&str, Option<&str>)> = s[2]["children"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["name"].as_str().unwrap(), s["detail"].as_str()))
        .collect();
    assert!(
        children.contains(&("%h", Some("f32[8, 3]"))),
        "{children:?}"
    );
    assert!(children.contains(&("sink @out", None)), "{children:?}");
    assert!(children.contains(&("source @w", None)), "{children:?}");

    // Inlay hints: the inferred result types of the two applies, at the end of their lines.
    let hints = c.request(
        "textDocument/inlayHint",
        json!({"textDocument": {"uri": URI},
               "range": {"start": {"line": 0, "character": 0}, "end": {"line": 16, "character": 0}}}),
    );
    let hints: Vec<(Value, &str)> = hints
        .as_array()
        .unwrap()
        .iter()
        .map(|h| (h["position"].clone(), h["label"].as_str().unwrap()))
        .collect();
    assert_eq!(
        hints,
        [
            (json!({"line": 12, "character": 32}), ": f32[8, 3]"),
            (json!({"line": 13, "character": 22}), ": f32[8, 3]"),
        ]
    );

    // Formatting is `tapc fmt`: one edit of the whole text.
    let f = c.request(
        "textDocument/formatting",
        json!({"textDocument": {"uri": URI}, "options": {"tabSize": 2, "insertSpaces": true}}),
    );
    let edits = f.as_array().unwrap();
    assert_eq!(edits.len(), 1);
    assert_eq!(edits[0]["newText"].as_str().unwrap(), tapc(&["fmt"], SRC));
    assert_eq!(
        edits[0]["range"]["end"],
        json!({"line": 16, "character": 0})
    );

    assert_eq!(c.shutdown(), Some(0));
}

#[test]
fn diagnostics_follow_changes_and_quick_fixes_apply() {
    let mut c = started();
    c.open(URI, SRC);
    assert!(c.diagnostics(URI, 1).is_empty());

    // Incremental change: misspell the op at `%y = apply @relu`.
    let relu = pos(SRC, "@relu(%h)", 0);
    let end = json!({"line": relu["line"], "character": relu["character"].as_u64().unwrap() + 5});
    let change = |version: i64, range: Value, text: &str| {
        json!({"textDocument": {"uri": URI, "version": version},
               "contentChanges": [{"range": range, "text": text}]})
    };
    c.notify(
        "textDocument/didChange",
        change(2, json!({"start": relu, "end": end}), "@rleu"),
    );
    let d = c.diagnostics(URI, 2);
    assert_eq!(d.len(), 1, "{d:?}");
    assert_eq!(d[0]["code"], "E0012");
    assert_eq!(d[0]["source"], "tapc");
    assert_eq!(d[0]["severity"], 1);
    assert_eq!(d[0]["range"]["start"], relu);
    let msg = d[0]["message"].as_str().unwrap();
    assert!(msg.contains("op `@rleu` is not defined"), "{msg}");
    assert!(msg.contains("note: help: did you mean `@relu`?"), "{msg}");

    // The quick fix of the "did you mean" note puts `@relu` back.
    let actions = c.request(
        "textDocument/codeAction",
        json!({"textDocument": {"uri": URI}, "range": d[0]["range"],
               "context": {"diagnostics": d}}),
    );
    let a = &actions[0];
    assert_eq!(a["kind"], "quickfix");
    assert_eq!(a["diagnostics"][0]["code"], "E0012");
    let edit = &a["edit"]["changes"][URI][0];
    assert_eq!(edit["newText"], "@relu");
    assert_eq!(edit["range"], json!({"start": relu, "end": end}));

    // A shape error: the primary label is the apply's argument; the op's port is related information.
    let w = pos(SRC, "4, 3]", 0);
    let w_end = json!({"line": w["line"], "character": w["character"].as_u64().unwrap() + 1});
    c.notify(
        "textDocument/didChange",
        change(3, json!({"start": w, "end": w_end}), "5"),
    );
    let d = c.diagnostics(URI, 3);
    let shape = d.iter().find(|d| d["code"] == "E0021").expect("E0021");
    assert_eq!(
        line_of(shape),
        12,
        "the primary label is the apply's argument: {shape}"
    );
    let related = &shape["relatedInformation"][0];
    assert_eq!(related["message"], "input `w`: this is 4 here");
    assert_eq!(related["location"]["uri"], URI);
    assert_eq!(line_of(&related["location"]), 0);

    // Formatting a file with errors is refused with a message, not an edit.
    let f = c.request_raw(
        "textDocument/formatting",
        json!({"textDocument": {"uri": URI}, "options": {"tabSize": 2, "insertSpaces": true}}),
    );
    assert!(
        f["error"]["message"]
            .as_str()
            .unwrap()
            .contains("has errors"),
        "{f}"
    );

    // Full-text sync, then close: diagnostics are cleared.
    c.notify(
        "textDocument/didChange",
        json!({"textDocument": {"uri": URI, "version": 4}, "contentChanges": [{"text": SRC}]}),
    );
    assert!(c.diagnostics(URI, 4).is_empty());
    c.notify(
        "textDocument/didClose",
        json!({"textDocument": {"uri": URI}}),
    );
    assert_eq!(c.shutdown(), Some(0));
}

#[test]
fn navigation_works_in_a_file_that_does_not_compile() {
    let src = "graph @g {\n  %x = source @x : f32[4]\n  %y = apply @nope(%x)\n  sink @s %y\n}\n";
    let mut c = started();
    c.open(URI, src);
    let d = c.diagnostics(URI, 1);
    assert_eq!(d[0]["code"], "E0012");
    let def = c.request("textDocument/definition", at(src, "%y\n", 0));
    assert_eq!(def["range"]["start"], pos(src, "%y =", 0));
    let h = c.request("textDocument/hover", at(src, "%y\n", 0));
    let text = h["contents"]["value"].as_str().unwrap();
    assert!(text.contains("%y = apply @nope(%x)"), "{text}");
    assert!(text.contains("type unknown"), "{text}");
    assert_eq!(c.shutdown(), Some(0));
}

#[test]
fn hover_and_inlay_hints_work_around_an_error() {
    // One statement that does not lower (the graph is left out of the module): everything it
    // does not touch keeps its types.
    let src = SRC.replace(
        "  %y = apply @relu(%h)\n",
        "  %bad = apply @relu(%nope)\n  %y = apply @relu(%h)\n",
    );
    let mut c = started();
    c.open(URI, &src);
    let d = c.diagnostics(URI, 1);
    assert_eq!(d.len(), 1, "{d:?}");
    assert_eq!(d[0]["code"], "E0011");
    let hover = |c: &mut Client, needle: &str, skip: usize| {
        let h = c.request("textDocument/hover", at(&src, needle, skip));
        h["contents"]["value"].as_str().unwrap_or("").to_string()
    };
    let h = hover(&mut c, "%h)", 0);
    assert!(h.contains("%h : f32[8, 3]"), "{h}");
    let y = hover(&mut c, "%y =", 0);
    assert!(y.contains("%y : f32[8, 3]"), "{y}");
    assert!(y.contains("%y = apply @relu(%h) : f32[8, 3]"), "{y}");
    let apply = hover(&mut c, "apply @relu(%h)", 0);
    assert!(apply.contains("derived signature"), "{apply}");
    let bad = hover(&mut c, "%bad", 0);
    assert!(
        bad.contains("type unknown: its statement has errors"),
        "{bad}"
    );
    let hints = c.request(
        "textDocument/inlayHint",
        json!({"textDocument": {"uri": URI},
               "range": {"start": {"line": 0, "character": 0}, "end": {"line": 17, "character": 0}}}),
    );
    let lines: Vec<(u64, &str)> = hints
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            (
                h["position"]["line"].as_u64().unwrap(),
                h["label"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(lines, [(12, ": f32[8, 3]"), (14, ": f32[8, 3]")]);
    assert_eq!(c.shutdown(), Some(0));
}

#[test]
fn a_panicking_handler_is_an_error_response_and_the_server_carries_on() {
    let mut c = Client::start(&[("TAPC_LSP_TEST_PANIC", "textDocument/hover")]);
    c.initialize();
    c.open(URI, SRC);
    assert!(c.diagnostics(URI, 1).is_empty());
    let r = c.request_raw("textDocument/hover", at(SRC, "%h)", 0));
    assert_eq!(r["error"]["code"], -32603, "{r}");
    let msg = r["error"]["message"].as_str().unwrap();
    assert!(
        msg.contains("internal error in textDocument/hover"),
        "{msg}"
    );
    let d = c.request("textDocument/definition", at(SRC, "%h)", 0));
    assert_eq!(line_of(&d), 12);
    let r = c.request_raw("textDocument/typeDefinition", at(SRC, "%h)", 0));
    assert_eq!(r["error"]["code"], -32601, "{r}");
    assert_eq!(c.shutdown(), Some(0));
}

#[test]
fn the_textmate_grammar_scopes_every_example() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/editors/teg.tmLanguage.json");
    let g: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    assert_eq!(g["scopeName"], "source.teg");
    let repo = g["repository"].as_object().unwrap();
    let rule = |name: &str| regex::Regex::new(repo[name]["match"].as_str().unwrap()).unwrap();
    // Every rule compiles (these patterns are in the subset Oniguruma and `regex` share).
    for name in repo.keys() {
        rule(name);
    }
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/examples");
    for entry in std::fs::read_dir(dir).unwrap() {
        let file = entry.unwrap().path();
        if file.extension().and_then(|e| e.to_str()) != Some("teg") {
            continue;
        }
        let src = std::fs::read_to_string(&file).unwrap();
        for line in src.lines() {
            let code = line.split("//").next().unwrap();
            if line.trim_start().starts_with("//") {
                assert!(rule("comment").is_match(line), "{line}");
            }
            // Every `%value` and `@name` of the line is one token of its scope.
            for word in code.split(|c: char| !(c.is_alphanumeric() || "%@_.".contains(c))) {
                let scope = match word.chars().next() {
                    Some('%') if word.len() > 1 => "local",
                    Some('@') if word.len() > 1 => "global",
                    _ => continue,
                };
                let m = rule(scope).find(word).map(|m| m.as_str());
                assert_eq!(m, Some(word), "{scope} in {}: {line}", file.display());
            }
            if let Some(c) = rule("item").captures(code) {
                let name = c.get(3).unwrap().as_str();
                assert!(code.contains(&format!("{} {name}", c.get(2).unwrap().as_str())));
            }
        }
    }
}

#[test]
fn hover_on_a_shard_shows_its_footprint_windows() {
    let src = SRC.replace(
        "  %h = apply @linear(%x, %w, %b)\n",
        "  %x.1 = slice %x [4:8, 0:4]\n  %h = apply @linear(%x.1, %w, %b) @[4:8, 0:3]\n",
    );
    let mut c = started();
    c.open(URI, &src);
    assert!(c.diagnostics(URI, 1).is_empty());
    let h = c.request("textDocument/hover", at(&src, "apply @linear", 0));
    let text = h["contents"]["value"].as_str().unwrap();
    // Rows 4..8 of the whole index space: the shard reads rows 4..8 of x, all of w and b.
    let windows = "x: [4:8, 0:4]\nw: [0:4, 0:3]\nb: [0:3]\ny: [4:8, 0:3]";
    assert!(text.contains("footprint windows"), "{text}");
    assert!(text.contains(windows), "{text}");
    assert_eq!(c.shutdown(), Some(0));
}

#[test]
fn exit_without_shutdown_is_exit_code_1() {
    let mut c = started();
    c.notify("exit", Value::Null);
    assert_eq!(c.wait_exit(), Some(1));
}

#[test]
fn in_process_driver_says_lsp_needs_the_binary() {
    let out = tapc::driver::run(&["lsp".to_string()]);
    assert_eq!(out.code, 1);
    assert!(out.stderr.contains("run the binary"), "{}", out.stderr);
    assert!(tapc::driver::is_lsp(&["lsp".to_string()]));
    assert!(!tapc::driver::is_lsp(&[
        "check".to_string(),
        "lsp".to_string()
    ]));
}

#[test]
fn every_position_of_a_half_typed_file_answers_without_error() {
    // SRC cut off in the middle of the graph, plus a stray character and a non-ASCII comment.
    let cut = SRC.find("  %y = apply").unwrap() + 9;
    let src = format!("// é — 𝄞\n{}# %z = apply @linear(", &SRC[..cut]);
    let mut c = started();
    c.open(URI, &src);
    assert!(!c.diagnostics(URI, 1).is_empty());
    let mut answered = 0;
    for (line, text) in src.lines().enumerate() {
        let width: usize = text.chars().map(char::len_utf16).sum();
        for character in 0..=width {
            let p = json!({"textDocument": {"uri": URI},
                           "position": {"line": line, "character": character}});
            for method in [
                "textDocument/hover",
                "textDocument/definition",
                "textDocument/completion",
                "textDocument/signatureHelp",
            ] {
                c.request(method, p.clone());
            }
            // prepareRename refuses where there is no name, with a message (not an internal
            // error).
            let r = c.request_raw("textDocument/prepareRename", p.clone());
            if let Some(e) = r.get("error") {
                assert_eq!(e["code"], -32803, "{r}");
            }
            let mut r = p.clone();
            r["context"] = json!({"includeDeclaration": true});
            c.request("textDocument/references", r);
            answered += 1;
        }
    }
    assert!(answered > 100);
    assert_eq!(c.shutdown(), Some(0));
}

#[test]
fn hover_shows_the_new_dtypes_in_signatures() {
    let src = SRC.replace("f32", "bf16");
    let mut c = started();
    c.open(URI, &src);
    assert!(c.diagnostics(URI, 1).is_empty());
    let h = c.request("textDocument/hover", at(&src, "apply @linear", 0));
    let text = h["contents"]["value"].as_str().unwrap();
    assert!(text.contains("bf16["), "{text}");
    assert!(!text.contains("f32"), "{text}");
    assert_eq!(c.shutdown(), Some(0));
}

/// A graph with state (docs/teg.md §8): hover on the state value, on `@w` after `state` and
/// after `update` shows the state; `@w` in the update goes to the state's definition; the
/// state statement gets no inlay hint (its type is written) and the apply gets one.
#[test]
fn state_and_update_hover_navigate_and_hint() {
    let src = "\
op @sgd(w: f32[N], g: f32[N]) -> (y: f32[N]) {
  y[i] = w[i] - 0.5 * g[i]
}

graph @g {
  %w = state @w : f32[4]
  %g = source @g : f32[4]
  %n = apply @sgd(%w, %g)
  update @w %n
}
";
    let mut c = started();
    c.open(URI, src);
    assert!(c.diagnostics(URI, 1).is_empty());
    let hover = |c: &mut Client, needle: &str, nth: usize| {
        let h = c.request("textDocument/hover", at(src, needle, nth));
        h["contents"]["value"].as_str().unwrap().to_string()
    };
    for (needle, nth) in [("%w =", 0), ("@w :", 0), ("@w %n", 0), ("%w, %g", 0)] {
        let text = hover(&mut c, needle, nth);
        assert!(text.contains("%w = state @w : f32[4]"), "{needle}: {text}");
    }
    let d = c.request("textDocument/definition", at(src, "@w %n", 0));
    assert_eq!(d["range"]["start"], pos(src, "@w :", 0), "{d}");
    let hints = c.request(
        "textDocument/inlayHint",
        json!({"textDocument": {"uri": URI},
               "range": {"start": {"line": 0, "character": 0}, "end": {"line": 10, "character": 0}}}),
    );
    let labels: Vec<(u64, &str)> = (hints.as_array().unwrap().iter())
        .map(|h| {
            (
                h["position"]["line"].as_u64().unwrap(),
                h["label"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(labels, [(7, ": f32[4]")], "{hints}");
    assert_eq!(c.shutdown(), Some(0));
}

#[test]
fn a_grad_statement_has_hovers_semantic_tokens_and_no_diagnostics() {
    let src = SRC.replace(
        "  sink @out %y\n",
        "  %l = apply @total(%y)\n  %dw, %db = grad %l wrt %w, %b\n  sink @out %y\n  sink @dw %dw\n",
    ) + "\nop @total(x: f32[B, N]) -> (l: f32[]) {\n  l[] = sum[i, j](x[i, j])\n}\n";
    let mut c = started();
    c.open(URI, &src);
    assert!(c.diagnostics(URI, 1).is_empty(), "{src}");
    let h = c.request("textDocument/hover", at(&src, "%dw", 0));
    let text = h["contents"]["value"].as_str().unwrap();
    assert!(text.contains("f32[4, 3]"), "{text}");
    let h = c.request("textDocument/hover", at(&src, "%l wrt", 0));
    assert!(
        h["contents"]["value"].as_str().unwrap().contains("f32[]"),
        "{h}"
    );
    let t = c.request(
        "textDocument/semanticTokens/full",
        json!({"textDocument": {"uri": URI}}),
    );
    assert!(t["data"].as_array().is_some_and(|d| !d.is_empty()), "{t}");
    assert_eq!(c.shutdown(), Some(0));
}

#[test]
fn hover_on_a_scatter_shows_its_signature() {
    let src = "graph @g {\n  %b = zeros : f32[4, 3]\n  %i = zeros : i64[6, 3]\n  %u = ones : f32[6, 3]\n  %y = scatter %b, %i, %u axis 0 reduce add\n  sink @y %y\n}\n";
    let mut c = started();
    c.open(URI, src);
    assert!(c.diagnostics(URI, 1).is_empty(), "{src}");
    let h = c.request("textDocument/hover", at(src, "scatter", 0));
    let text = h["contents"]["value"].as_str().unwrap();
    // The updates' index space; the scattered axis of the base and result is read whole.
    let sig = "index [i0: 6, i1: 3]\n    base: [0, i1] + [4, 1]\n    idx: [i0, i1] + [1, 1]\n    upd: [i0, i1] + [1, 1]\n    y: [0, i1] + [4, 1]";
    assert!(text.contains("derived signature"), "{text}");
    assert!(text.contains(sig), "{text}");
    let h = c.request("textDocument/hover", at(src, "%y =", 0));
    let text = h["contents"]["value"].as_str().unwrap();
    assert!(
        text.contains("%y = scatter %b, %i, %u axis 0 reduce add : f32[4, 3]"),
        "{text}"
    );
    assert_eq!(c.shutdown(), Some(0));
}
