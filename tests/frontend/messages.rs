//! Messages in the user's terms, labelled on the offending token, with the fix as `help:`:
//! a misspelt keyword, a value used before its definition, an unclosed `{`, an unknown
//! parameter, a cost for an unknown dimension and a shard range wider than its input.

use tapc::diag::Diagnostic;

const OP: &str = "op @id(x: f32[N]) -> (y: f32[N]) {\n  y[i] = x[i]\n}\n";

/// The error diagnostics of `src`.
fn errors(src: &str) -> Vec<Diagnostic> {
    let (_, _, d) = tapc::compile_source(src);
    d.0.into_iter().filter(|d| d.is_error()).collect()
}

/// The text under the primary label, and the text under each secondary one.
fn labelled<'a>(src: &'a str, d: &Diagnostic) -> (&'a str, Vec<&'a str>) {
    let text = |l: &tapc::diag::Label| &src[l.span.start as usize..l.span.end as usize];
    let primary = d.labels.iter().find(|l| l.primary).map(text).unwrap();
    let secondary = d.labels.iter().filter(|l| !l.primary).map(text).collect();
    (primary, secondary)
}

#[test]
fn a_misspelt_keyword_suggests_the_keyword() {
    let src =
        format!("{OP}graph @g {{\n  %a = zeros : f32[2]\n  %b = aply @id(%a)\n  snk @out %b\n}}\n");
    let d = errors(&src);
    assert_eq!(d.len(), 2, "{d:#?}");
    assert_eq!(d[0].code.unwrap().to_string(), "E0002");
    assert_eq!(d[0].message, "`aply` is not a keyword");
    assert_eq!(labelled(&src, &d[0]).0, "aply");
    assert_eq!(d[0].notes, ["help: did you mean `apply`?"]);
    assert_eq!(d[1].message, "`snk` is not a keyword");
    assert_eq!(d[1].notes, ["help: did you mean `sink`?"]);
    // At item level, and as an unknown instruction (no `@` after it).
    let src = "grph @g {\n}\n";
    let d = errors(src);
    assert_eq!(d[0].message, "`grph` is not a keyword");
    assert_eq!(d[0].notes, ["help: did you mean `graph`?"]);
    let src = "graph @g {\n  %a = zeros : f32[2]\n  %b = tranpose %a [0]\n}\n";
    let d = errors(src);
    assert_eq!(d[0].code.unwrap().to_string(), "E0014");
    assert_eq!(d[0].notes[0], "help: did you mean `transpose`?");
}

#[test]
fn a_use_above_the_definition_points_at_it() {
    let src = format!(
        "{OP}graph @g {{\n  %b = apply @id(%a)\n  %a = zeros : f32[2]\n  sink @out %b\n  sink @c %nope\n}}\n"
    );
    let d = errors(&src);
    assert_eq!(d.len(), 2, "{d:#?}");
    assert_eq!(d[0].code.unwrap().to_string(), "E0011");
    assert_eq!(d[0].message, "`%a` is used before its definition");
    let (primary, secondary) = labelled(&src, &d[0]);
    assert_eq!(primary, "%a");
    assert_eq!(secondary, ["%a"]);
    let def = d[0].labels.iter().find(|l| !l.primary).unwrap();
    assert_eq!(def.span.start as usize, src.find("%a = zeros").unwrap());
    assert_eq!(
        d[0].notes,
        ["help: move this statement below the definition of `%a` (values are defined before their first use)"]
    );
    // A name defined nowhere is still "not defined".
    assert_eq!(d[1].message, "`%nope` is not defined");
}

#[test]
fn an_unclosed_brace_is_reported_at_the_brace() {
    // The graph is not closed before the next item.
    let src = format!("graph @g {{\n  %a = zeros : f32[2]\n  sink @out %a\n\n{OP}");
    let d = errors(&src);
    let u = d
        .iter()
        .find(|d| d.message == "unclosed `{`")
        .expect("unclosed");
    assert_eq!(u.code.unwrap().to_string(), "E0002");
    let brace = u.labels.iter().find(|l| l.primary).unwrap();
    assert_eq!(brace.span.start as usize, src.find('{').unwrap());
    assert_eq!(brace.message, "the body of graph `@g` is never closed");
    assert_eq!(labelled(&src, u).1, ["op"]);
    assert_eq!(u.notes, ["help: add `}` on the line before this `op`"]);
    assert!(
        !d.iter().any(|d| d.message.starts_with("unexpected")),
        "{d:#?}"
    );
    // The last item is not closed: the end of the file.
    let src = format!("{OP}graph @g {{\n  %a = zeros : f32[2]\n  sink @out %a\n");
    let d = errors(&src);
    assert_eq!(d.len(), 1, "{d:#?}");
    assert_eq!(d[0].code.unwrap().to_string(), "E0003");
    assert_eq!(d[0].message, "unclosed `{`");
    let brace = d[0].labels.iter().find(|l| l.primary).unwrap();
    assert_eq!(brace.span.start as usize, src.rfind('{').unwrap());
    assert_eq!(d[0].notes, ["help: add `}` at the end of the file"]);
}

#[test]
fn an_unclosed_last_graph_still_has_its_errors_checked() {
    let src = format!(
        "{OP}graph @g {{\n  %a = zeros : f32[2]\n  %b = apply @id(%nope)\n  sink @out %b\n"
    );
    let d = errors(&src);
    let codes: Vec<String> = d.iter().map(|d| d.code.unwrap().to_string()).collect();
    assert_eq!(codes, ["E0003", "E0011"], "{d:#?}");
    assert_eq!(labelled(&src, &d[1]).0, "%nope");
}

#[test]
fn an_unknown_parameter_is_labelled_at_its_name() {
    let src = "op @scale<s>(x: f32[N]) -> (y: f32[N]) {\n  y[i] = x[i] * f32(s)\n}\n\
               graph @g {\n  %a = zeros : f32[2]\n  %b = apply @scale<s = 1, t = 2>(%a)\n  sink @out %b\n}\n";
    let d = errors(src);
    assert_eq!(d.len(), 1, "{d:#?}");
    assert_eq!(d[0].message, "`@scale` has no parameter `t`");
    assert_eq!(labelled(src, &d[0]).0, "t");
    // The same with a poisoned argument: the parameters are still checked, at the name.
    let src = src.replace("(%a)", "(%nope)");
    let d = errors(&src);
    assert_eq!(d.len(), 2, "{d:#?}");
    assert_eq!(labelled(&src, &d[0]).0, "t");
}

#[test]
fn a_cost_for_an_unknown_dimension_is_labelled_at_the_dimension() {
    let src =
        "extern op @mm(a: f32[M, K], b: f32[K, N]) -> (c: f32[M, N]) {\n  index [i: M, j: N]\n  \
               a: [i, 0] + [1, K]\n  b: [0, j] + [K, 1]\n  c: [i, j] + [1, 1]\n  \
               cost { i: { flops: 2 }, q: { flops: 2 } }\n}\n";
    let d = errors(src);
    assert_eq!(d.len(), 1, "{d:#?}");
    assert_eq!(
        d[0].message,
        "cost for `q`, which is not an index dimension"
    );
    assert_eq!(labelled(src, &d[0]).0, "q");
    assert_eq!(d[0].notes, ["the index dimensions are i, j"]);
}

#[test]
fn a_shard_range_wider_than_its_input_is_reported_once_at_the_range() {
    let src = "op @rows(x: f32[N, K]) -> (y: f32[N, K]) {\n  y[i, j] = x[i, j] + x[i, j]\n}\n\
               graph @g {\n  %x = zeros : f32[512, 4]\n  %y = apply @rows(%x) @[0:640, 0:4]\n  sink @out %y\n}\n";
    let d = errors(src);
    assert_eq!(d.len(), 1, "{d:#?}");
    assert_eq!(d[0].code.unwrap().to_string(), "E0032");
    assert_eq!(
        d[0].message,
        "the range `0:640` exceeds the 512 rows of `%x`"
    );
    assert_eq!(labelled(src, &d[0]).0, "0:640");
    assert_eq!(
        d[0].notes,
        ["help: narrow the range to at most 512 rows, or pass a larger `%x`"]
    );
}
