//! Messages in the user's terms, labelled on the offending token, with the fix as `help:`:
//! a misspelt keyword, a value used before its definition, and an unclosed `{`.

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
