//! Unit tests of `tapc::ir`, kept out of the library so that `cargo test` compiles it once.

use tapc::ir::kernel::{OpBody, OpDef};
use tapc::ir::*;

/// An op with only a name: the index looks at nothing else (and the IR is built by hand,
/// with no front end).
fn op(name: &str) -> OpDef {
    OpDef {
        name: name.to_string(),
        params: vec![],
        inputs: vec![],
        outputs: vec![],
        body: OpBody::Kernel(vec![]),
        span: Default::default(),
        name_span: Default::default(),
    }
}

#[test]
fn op_lookup_follows_every_kind_of_mutation() {
    let mut m = Module::default();
    assert!(m.op("a").is_none());
    m.ops.push(op("a"));
    m.ops.push(op("b"));
    assert_eq!(m.op("b").map(|o| o.name.as_str()), Some("b"));
    m.ops.reverse();
    assert_eq!(m.op("a").map(|o| o.name.as_str()), Some("a"));
    assert_eq!(m.op("b").map(|o| o.name.as_str()), Some("b"));
    m.ops = vec![op("c")];
    assert!(m.op("a").is_none());
    assert_eq!(m.op("c").map(|o| o.name.as_str()), Some("c"));
    m.ops.insert(0, op("d"));
    assert_eq!(m.op("c").map(|o| o.name.as_str()), Some("c"));
    assert_eq!(m.op("d").map(|o| o.name.as_str()), Some("d"));
    let copy = m.clone();
    assert_eq!(copy, m);
    assert_eq!(copy.op("d").map(|o| o.name.as_str()), Some("d"));
}
