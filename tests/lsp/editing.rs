//! Editing requests over stdio: completion in each context (on a file that compiles and on one
//! being typed), and formatting that keeps comments (byte-exact expected text).

use crate::lsp::{pos, started};
use crate::lsp_client::Client;
use serde_json::{json, Value};

const URI: &str = "file:///tmp/tapc-lsp-test/editing.teg";

const SRC: &str = "\
op @linear(x: f32[B, K], w: f32[K, N]) -> (y: f32[B, N]) {
  t[i, j] = sum[k](x[i, k] * w[k, j])
  y[i, j] = t[i, j]
}

op @scale<m>(x: f32[..S]) -> (y: f32[..S]) {
  y[..i] = x[..i] * f32(m)
}

graph @layer {
  %x = source @x : f32[8, 4]
  %w = source @w : f32[4, 3]
  %h = apply @linear(%x, %w)
  %s = apply @scale<m = 2>(%h)
  sink @out %s
}
";

/// The completion items at `skip` bytes after the `nth` occurrence of `needle`:
/// (label, detail, documentation).
fn complete(c: &mut Client, text: &str, needle: &str, skip: u64) -> Vec<(String, String, String)> {
    let mut p = pos(text, needle, 0);
    p["character"] = json!(p["character"].as_u64().unwrap() + skip);
    let r = c.request(
        "textDocument/completion",
        json!({"textDocument": {"uri": URI}, "position": p}),
    );
    let s = |v: &Value| v.as_str().unwrap_or("").to_string();
    r.as_array()
        .unwrap()
        .iter()
        .map(|i| (s(&i["label"]), s(&i["detail"]), s(&i["documentation"])))
        .collect()
}

fn labels(items: &[(String, String, String)]) -> Vec<&str> {
    items.iter().map(|i| i.0.as_str()).collect()
}

fn detail<'a>(items: &'a [(String, String, String)], label: &str) -> &'a str {
    let i = items.iter().find(|i| i.0 == label);
    &i.unwrap_or_else(|| panic!("no `{label}` in {items:?}")).1
}

#[test]
fn completion_in_each_context() {
    let mut c = started();
    c.open(URI, SRC);
    assert!(c.diagnostics(URI, 1).is_empty());

    // `@` after `apply`: the ops, with their headers; not the graph.
    let ops = complete(&mut c, SRC, "@linear(%x", 1);
    assert_eq!(labels(&ops), ["@linear", "@scale"]);
    assert_eq!(
        detail(&ops, "@linear"),
        "op @linear(x: f32[B, K], w: f32[K, N]) -> (y: f32[B, N])"
    );
    // The typed prefix filters, and the edit replaces the word with its sigil.
    let mut p = pos(SRC, "@linear(%x", 0);
    p["character"] = json!(p["character"].as_u64().unwrap() + 3);
    let r = c.request(
        "textDocument/completion",
        json!({"textDocument": {"uri": URI}, "position": p}),
    );
    assert_eq!(r.as_array().unwrap().len(), 1);
    let mut start = p.clone();
    start["character"] = json!(p["character"].as_u64().unwrap() - 3);
    assert_eq!(r[0]["textEdit"]["range"], json!({"start": start, "end": p}));
    assert_eq!(r[0]["textEdit"]["newText"], "@linear");

    // `%` in an argument list: the values defined above, with types, and the expected port.
    let vals = complete(&mut c, SRC, "%h)", 1);
    assert_eq!(labels(&vals), ["%x", "%w", "%h"]);
    assert_eq!(detail(&vals, "%h"), "f32[8, 3]");
    assert_eq!(vals[2].2, "argument 1 of @scale: x: f32[..S]");

    // Inside `<...>`: the op's parameters.
    let params = complete(&mut c, SRC, "m = 2>", 0);
    assert_eq!(labels(&params), ["m"]);
    assert_eq!(
        detail(&params, "m"),
        "parameter of op @scale<m>(x: f32[..S]) -> (y: f32[..S])"
    );

    // In a kernel: ports, temporaries, index variables, sizes, functions and casts.
    let body = complete(&mut c, SRC, "= t[i, j]", 2);
    for (label, d) in [
        ("x", "x: f32[B, K]"),
        ("y", "y: f32[B, N]"),
        ("t", "temporary"),
        ("k", "index variable"),
        ("K", "size (from the port types)"),
        ("exp", "exp(x): float"),
        ("sum", "sum[k](e): reduction over k"),
        ("f64", "f64(x): a cast"),
    ] {
        assert_eq!(detail(&body, label), d, "{label}");
    }
    assert!(!labels(&body).contains(&"%x"));
    assert_eq!(labels(&complete(&mut c, SRC, "sum[k]", 2)), ["sum"]);
    // The parameter of an op with one.
    assert_eq!(
        detail(&complete(&mut c, SRC, "f32(m)", 4), "m"),
        "parameter"
    );

    // After `:` in a graph: dtypes (in `DType::ALL` order); after `=`: instructions; at a
    // statement start: keywords.
    assert_eq!(
        labels(&complete(&mut c, SRC, "f32[8, 4]", 1)),
        ["f32", "f64", "f16"]
    );
    let rhs = complete(&mut c, SRC, "= source @w", 2);
    assert_eq!(
        detail(&rhs, "apply"),
        "apply @op<params>(args) @[range] on N"
    );
    assert_eq!(detail(&rhs, "zeros"), "zeros : dtype[dims]");
    let start = complete(&mut c, SRC, "sink @out", 0);
    assert_eq!(detail(&start, "sink"), "sink @name %value");
    assert_eq!(detail(&start, "%s"), "f32[8, 3]");
    assert_eq!(c.shutdown(), Some(0));
}

#[test]
fn completion_while_typing_a_broken_graph() {
    let mut c = started();
    let text =
        format!("{SRC}\ngraph @g2 {{\n  %q = source @q : f32[4, 3]\n  %r = apply @linear(%q, %");
    c.open(URI, &text);
    assert!(!c.diagnostics(URI, 1).is_empty());
    let last = text.lines().count() - 1;
    let col = text.lines().last().unwrap().len();
    let r = c.request(
        "textDocument/completion",
        json!({"textDocument": {"uri": URI}, "position": {"line": last, "character": col}}),
    );
    let items = r.as_array().unwrap();
    assert_eq!(items.len(), 2, "{r}");
    assert_eq!(items[0]["label"], "%q");
    assert_eq!(
        items[0]["documentation"],
        "argument 2 of @linear: w: f32[K, N]"
    );
    // The expected port, as an item of its own (a field), with its type.
    assert_eq!(items[1]["label"], "%w");
    assert_eq!(items[1]["kind"], 5);
    assert_eq!(items[1]["detail"], "input w: f32[K, N]");
    assert_eq!(
        items[1]["documentation"],
        "argument 2 of @linear: w: f32[K, N]"
    );
    // Between items: the item keywords.
    let between = pos(&text, "\ngraph @g2", 0);
    let r = c.request(
        "textDocument/completion",
        json!({"textDocument": {"uri": URI}, "position": between}),
    );
    let kw: Vec<&str> = r
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["label"].as_str().unwrap())
        .collect();
    assert_eq!(kw, ["op", "extern", "graph"]);
    assert_eq!(c.shutdown(), Some(0));
}

pub(crate) const COMMENTED: &str = "\
// A layer.
op @double(x: f32[N]) -> (y: f32[N]) {
  y[i] = x[i]+x[i]   // twice
}
graph @g {
  %a = ones : f32[3]


  // the doubled values
  %b = apply @double(%a)
  sink @out %b   // written out
}
";

pub(crate) const COMMENTED_FORMATTED: &str = "\
// A layer.
op @double(x: f32[N]) -> (y: f32[N]) {
  y[i] = x[i] + x[i]  // twice
}

graph @g {
  %a = ones : f32[3]

  // the doubled values
  %b = apply @double(%a) : f32[3]
  sink @out %b  // written out
}
";

#[test]
fn formatting_keeps_comments_and_blank_lines() {
    let mut c = started();
    c.open(URI, COMMENTED);
    assert!(c.diagnostics(URI, 1).is_empty());
    let f = c.request(
        "textDocument/formatting",
        json!({"textDocument": {"uri": URI}, "options": {"tabSize": 2, "insertSpaces": true}}),
    );
    assert_eq!(f[0]["newText"], COMMENTED_FORMATTED);
    // Formatted text is left alone.
    let doc = json!({"uri": URI, "version": 2});
    c.notify(
        "textDocument/didChange",
        json!({"textDocument": doc, "contentChanges": [{"text": COMMENTED_FORMATTED}]}),
    );
    assert!(c.diagnostics(URI, 2).is_empty());
    let f = c.request(
        "textDocument/formatting",
        json!({"textDocument": {"uri": URI}, "options": {"tabSize": 2, "insertSpaces": true}}),
    );
    assert_eq!(f, json!([]));
    assert_eq!(c.shutdown(), Some(0));
}

/// `text` with LSP text edits applied (ASCII text: columns are bytes).
fn apply_edits(text: &str, edits: &[Value]) -> String {
    let offset = |p: &Value| {
        let line = p["line"].as_u64().unwrap() as usize;
        let start: usize = text.split_inclusive('\n').take(line).map(str::len).sum();
        start + p["character"].as_u64().unwrap() as usize
    };
    let mut spans: Vec<(usize, usize, &str)> = edits
        .iter()
        .map(|e| {
            let r = &e["range"];
            (
                offset(&r["start"]),
                offset(&r["end"]),
                e["newText"].as_str().unwrap(),
            )
        })
        .collect();
    spans.sort_by_key(|s| std::cmp::Reverse(s.0));
    let mut out = text.to_string();
    for (start, end, new) in spans {
        out.replace_range(start..end, new);
    }
    out
}

fn at(text: &str, needle: &str, skip: u64) -> Value {
    let mut p = pos(text, needle, 0);
    p["character"] = json!(p["character"].as_u64().unwrap() + skip);
    json!({"textDocument": {"uri": URI}, "position": p})
}

#[test]
fn signature_help_inside_applies() {
    let mut c = started();
    c.open(URI, SRC);
    assert!(c.diagnostics(URI, 1).is_empty());
    let h = c.request("textDocument/signatureHelp", at(SRC, "%w)", 1));
    let sig = &h["signatures"][0];
    let label = "@linear(x: f32[B, K], w: f32[K, N]) -> (y: f32[B, N])";
    assert_eq!(sig["label"], label);
    assert_eq!(h["activeParameter"], 1);
    let w = label.find("w: f32").unwrap();
    assert_eq!(
        sig["parameters"][1]["label"],
        json!([w, w + "w: f32[K, N]".len()])
    );
    assert_eq!(sig["parameters"].as_array().unwrap().len(), 2);
    // In `<...>` the parameters are the op's parameters.
    let h = c.request("textDocument/signatureHelp", at(SRC, "m = 2>", 0));
    let sig = &h["signatures"][0];
    assert_eq!(sig["label"], "@scale<m>(x: f32[..S]) -> (y: f32[..S])");
    assert_eq!(sig["parameters"], json!([{"label": [7, 8]}]));
    assert_eq!(h["activeParameter"], 0);
    // Outside an apply's brackets: none.
    let h = c.request("textDocument/signatureHelp", at(SRC, "sink @out", 0));
    assert!(h.is_null(), "{h}");
    assert_eq!(c.shutdown(), Some(0));
}

/// Renames at `needle` + `skip` to `new`: the edits, applied to `text`.
fn rename(c: &mut Client, text: &str, needle: &str, skip: u64, new: &str) -> (usize, String) {
    let mut p = at(text, needle, skip);
    p["newName"] = json!(new);
    let r = c.request("textDocument/rename", p);
    let edits = r["changes"][URI].as_array().unwrap().clone();
    (edits.len(), apply_edits(text, &edits))
}

#[test]
fn rename_values_ops_ports_and_parameters() {
    let mut c = started();
    c.open(URI, SRC);
    assert!(c.diagnostics(URI, 1).is_empty());
    // prepareRename gives the name without its sigil.
    let r = c.request("textDocument/prepareRename", at(SRC, "%h)", 1));
    let h = pos(SRC, "%h)", 0);
    let (line, col) = (h["line"].clone(), h["character"].as_u64().unwrap());
    assert_eq!(
        r,
        json!({"start": {"line": line, "character": col + 1}, "end": {"line": line, "character": col + 2}})
    );
    let mut renamed = Vec::new();
    let (n, text) = rename(&mut c, SRC, "%h)", 1, "hidden");
    assert_eq!(n, 2);
    assert!(text.contains("%hidden = apply @linear(%x, %w)\n") && text.contains("(%hidden)\n"));
    renamed.push(text);
    // A sigil in the new name is accepted.
    let (n, text) = rename(&mut c, SRC, "@linear(%x", 2, "@dense");
    assert_eq!(n, 2);
    assert!(text.contains("op @dense(x") && text.contains("apply @dense(%x, %w)"));
    renamed.push(text);
    // A port: its header entry and every use in the body.
    let (n, text) = rename(&mut c, SRC, "w[k, j]", 0, "weight");
    assert_eq!(n, 2);
    assert!(text.contains("weight: f32[K, N]) ->") && text.contains("* weight[k, j])"));
    renamed.push(text);
    // A parameter, from an apply: the header, the body and the `<key = ...>` of the apply.
    let (n, text) = rename(&mut c, SRC, "m = 2>", 0, "factor");
    assert_eq!(n, 3);
    assert!(text.contains("@scale<factor>(x") && text.contains("f32(factor)"));
    assert!(text.contains("apply @scale<factor = 2>(%h)"));
    // Each renamed text still compiles cleanly (the last one stays open).
    renamed.push(text.clone());
    for (k, t) in renamed.iter().enumerate() {
        let version = k as i64 + 2;
        c.notify(
            "textDocument/didChange",
            json!({"textDocument": {"uri": URI, "version": version},
                   "contentChanges": [{"text": t}]}),
        );
        assert!(c.diagnostics(URI, version).is_empty(), "{t}");
    }

    // Refusals say why: a taken name, an invalid name, no name at the cursor.
    let mut p = at(&text, "%h)", 1);
    p["newName"] = json!("x");
    let e = c.request_raw("textDocument/rename", p);
    assert_eq!(e["error"]["message"], "`%x` is already defined", "{e}");
    let mut p = at(&text, "x[i, k]", 0);
    p["newName"] = json!("1x");
    let e = c.request_raw("textDocument/rename", p);
    assert_eq!(
        e["error"]["message"], "`1x` is not a valid name here",
        "{e}"
    );
    let e = c.request_raw("textDocument/prepareRename", at(&text, "apply @scale", 1));
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("nothing to rename here"),
        "{e}"
    );
    assert_eq!(c.shutdown(), Some(0));
}

#[test]
fn every_editing_request_answers_everywhere_in_the_examples() {
    let mut c = started();
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/examples");
    let mut asked = 0;
    for (k, entry) in std::fs::read_dir(dir).unwrap().flatten().enumerate() {
        let text = std::fs::read_to_string(entry.path()).unwrap();
        let uri = format!("file:///tmp/tapc-lsp-test/example{k}.teg");
        let doc = json!({"uri": uri, "languageId": "teg", "version": 1, "text": text});
        c.notify("textDocument/didOpen", json!({ "textDocument": doc }));
        let tokens = c.request(
            "textDocument/semanticTokens/full",
            json!({"textDocument": {"uri": uri}}),
        );
        let n = tokens["data"].as_array().unwrap().len();
        assert!(n > 0 && n.is_multiple_of(5), "{tokens}");
        for (line, l) in text.lines().enumerate() {
            for character in (0..=l.len()).step_by(3) {
                let p = json!({"textDocument": {"uri": uri},
                               "position": {"line": line, "character": character}});
                c.request("textDocument/completion", p.clone());
                c.request("textDocument/signatureHelp", p.clone());
                let r = c.request_raw("textDocument/prepareRename", p);
                if let Some(e) = r.get("error") {
                    assert_eq!(e["code"], -32803, "{r}");
                }
                asked += 1;
            }
        }
    }
    assert!(asked > 1000, "{asked}");
    assert_eq!(c.shutdown(), Some(0));
}

/// The quick fixes offered for the first diagnostic of version `version` of the open document,
/// applied one by one to `text`.
fn fix_first(c: &mut Client, text: &str, version: i64) -> (Value, Vec<String>) {
    let d = c.diagnostics(URI, version);
    let actions = c.request(
        "textDocument/codeAction",
        json!({"textDocument": {"uri": URI}, "range": d[0]["range"],
               "context": {"diagnostics": [d[0].clone()]}}),
    );
    let fixed = actions
        .as_array()
        .unwrap()
        .iter()
        .map(|a| apply_edits(text, a["edit"]["changes"][URI].as_array().unwrap()))
        .collect();
    (d[0].clone(), fixed)
}

#[test]
fn quick_fixes_for_a_misspelt_keyword_and_a_missing_brace() {
    let mut c = started();
    let misspelt = SRC.replace("%h = apply @linear", "%h = aply @linear");
    c.open(URI, &misspelt);
    let (d, fixed) = fix_first(&mut c, &misspelt, 1);
    assert_eq!(d["code"], "E0002");
    assert_eq!(fixed, [SRC]);
    // A graph not closed at the end of the file: the `}` goes at the end.
    let open_end = SRC.trim_end().strip_suffix('}').unwrap().to_string();
    let change = |v: i64, t: &str| json!({"textDocument": {"uri": URI, "version": v}, "contentChanges": [{"text": t}]});
    c.notify("textDocument/didChange", change(2, &open_end));
    let (d, fixed) = fix_first(&mut c, &open_end, 2);
    assert_eq!(d["code"], "E0003");
    assert_eq!(d["range"]["start"], pos(&open_end, "{\n  %x", 0));
    assert_eq!(fixed, [SRC]);
    // An op not closed before the next item: the `}` goes after the op's last line.
    let open_op = SRC.replacen("f32(m)\n}\n", "f32(m)\n\n", 1);
    c.notify("textDocument/didChange", change(3, &open_op));
    let (d, fixed) = fix_first(&mut c, &open_op, 3);
    assert_eq!(d["code"], "E0002");
    assert_eq!(fixed, [SRC.replacen("f32(m)\n}\n", "f32(m)\n}\n\n", 1)]);
    assert_eq!(c.shutdown(), Some(0));
}

#[test]
fn a_use_above_its_definition_is_moved_below_it() {
    let mut c = started();
    let swapped = SRC.replace(
        "  %w = source @w : f32[4, 3]\n  %h = apply @linear(%x, %w)\n",
        "  %h = apply @linear(%x, %w)\n  %w = source @w : f32[4, 3]\n",
    );
    c.open(URI, &swapped);
    let (d, fixed) = fix_first(&mut c, &swapped, 1);
    assert_eq!(d["code"], "E0011");
    assert_eq!(fixed, [SRC]);
    // Not where the moved statement's result is used before the definition: no fix.
    let blocked = SRC.replace(
        "  %w = source @w : f32[4, 3]\n  %h = apply @linear(%x, %w)\n  %s = apply @scale<m = 2>(%h)\n",
        "  %h = apply @linear(%x, %w)\n  %s = apply @scale<m = 2>(%h)\n  %w = source @w : f32[4, 3]\n",
    );
    assert_ne!(blocked, SRC);
    let change = json!({"textDocument": {"uri": URI, "version": 2},
                        "contentChanges": [{"text": blocked}]});
    c.notify("textDocument/didChange", change);
    let (d, fixed) = fix_first(&mut c, &blocked, 2);
    assert_eq!(d["code"], "E0011");
    assert!(fixed.is_empty(), "{fixed:?}");
    assert_eq!(c.shutdown(), Some(0));
}

#[test]
fn semantic_tokens_classify_each_word() {
    let mut c = Client::start(&[]);
    let init = c.initialize();
    let opts = &init["capabilities"]["semanticTokensProvider"];
    assert_eq!(opts["full"], true, "{init}");
    let legend: Vec<String> = opts["legend"]["tokenTypes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap().to_string())
        .collect();
    let text = "\
op @f(x: f32[N]) -> (y: f32[N]) {  // c
  y[i] = exp(x[i]) * 2.0
}
graph @g {
  %a = zeros : f32[3]
  %b = apply @f(%a)
  sink @out %b
}
";
    c.open(URI, text);
    let r = c.request(
        "textDocument/semanticTokens/full",
        json!({"textDocument": {"uri": URI}}),
    );
    let data: Vec<u64> = r["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    let (mut line, mut col) = (0, 0);
    let mut got = Vec::new();
    for t in data.chunks(5) {
        if t[0] > 0 {
            (line, col) = (line + t[0], t[1]);
        } else {
            col += t[1];
        }
        got.push((line, col, t[2], legend[t[3] as usize].as_str()));
    }
    let expected = [
        (0, 0, 2, "keyword"),
        (0, 3, 2, "function"),
        (0, 9, 3, "type"),
        (0, 24, 3, "type"),
        (0, 35, 4, "comment"),
        (1, 9, 3, "function"),
        (1, 21, 3, "number"),
        (3, 0, 5, "keyword"),
        (3, 6, 2, "namespace"),
        (4, 2, 2, "variable"),
        (4, 7, 5, "keyword"),
        (4, 15, 3, "type"),
        (4, 19, 1, "number"),
        (5, 2, 2, "variable"),
        (5, 7, 5, "keyword"),
        (5, 13, 2, "function"),
        (5, 16, 2, "variable"),
        (6, 2, 4, "keyword"),
        (6, 7, 4, "event"),
        (6, 12, 2, "variable"),
    ];
    assert_eq!(got, expected);
    assert_eq!(c.shutdown(), Some(0));
}

#[test]
fn the_fix_for_an_unknown_parameter_replaces_only_the_parameter() {
    let mut c = started();
    let misspelt = SRC.replace("@scale<m = 2>", "@scale<n = 2>");
    c.open(URI, &misspelt);
    let (d, fixed) = fix_first(&mut c, &misspelt, 1);
    assert_eq!(d["code"], "E0040");
    assert_eq!(fixed, [SRC]);
    assert_eq!(c.shutdown(), Some(0));
}

#[test]
fn a_dtype_mismatch_is_fixed_with_the_cast() {
    let mut c = started();
    let text = "\
op @trunc(x: f32[N]) -> (y: i32[N]) {
  y[i] = x[i]
}
graph @g {
  %a = ones : f32[3]
  %b = apply @trunc(%a)
  sink @out %b
}
";
    c.open(URI, text);
    let (d, fixed) = fix_first(&mut c, text, 1);
    assert_eq!(d["code"], "E0020");
    let want = text.replace("y[i] = x[i]", "y[i] = i32(x[i])");
    assert_eq!(fixed, [want.as_str()]);
    let change = json!({"textDocument": {"uri": URI, "version": 2},
                        "contentChanges": [{"text": want}]});
    c.notify("textDocument/didChange", change);
    assert!(c.diagnostics(URI, 2).is_empty());
    assert_eq!(c.shutdown(), Some(0));
}
