//! Unit tests of `tapc::lsp::names`, kept out of the library so that `cargo test` compiles it once.

use tapc::lsp::names::*;

const SRC: &str = "op @f(x: f32[N]) -> (y: f32[N]) {\n  y[i] = x[i]\n}\n\
    graph @g {\n  %x = source @x : f32[4]\n  %y = apply @f(\n    %x)\n  sink @out %y\n  \
    sequence @out -> %x\n}\ngraph @h {\n  %x = source @x : f32[2]\n}\n";

#[test]
fn finds_definitions_and_uses_per_graph() {
    let n = Names::scan(SRC);
    let use_x = SRC.find("    %x)").unwrap() + 4;
    let o = n.at(use_x).unwrap();
    assert!(!o.def);
    let def = n.definition(&o.sym).unwrap();
    assert_eq!(def.span.start, SRC.find("%x = source").unwrap());
    // `%x` of @h is another value; sequence uses count.
    assert_eq!(n.references(&o.sym).count(), 3);
    let f = n.at(SRC.find("@f(\n").unwrap()).unwrap();
    assert_eq!(f.sym, Sym::Op("f".into()));
    assert_eq!(
        n.definition(&f.sym).unwrap().span.start,
        SRC.find("@f(x").unwrap()
    );
    let out = n.at(SRC.find("@out ->").unwrap()).unwrap();
    assert_eq!(n.references(&out.sym).count(), 2);
    assert_eq!(n.items.len(), 3);
    let graphs: Vec<&str> = (n.items.iter().filter(|it| it.is_graph))
        .map(|it| it.name.as_str())
        .collect();
    assert_eq!(graphs, ["g", "h"]);
    let stmts: Vec<(&str, bool)> = n
        .stmts
        .iter()
        .map(|s| (s.results[0].as_str(), s.inferred))
        .collect();
    assert_eq!(stmts, [("x", false), ("y", true), ("x", false)]);
}
