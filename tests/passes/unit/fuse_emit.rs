//! Unit tests of `tapc::passes::fuse::emit`, kept out of the library so that `cargo test` compiles it once.

use tapc::passes::fuse::emit::*;

#[test]
fn list_variables_get_letters() {
    assert_eq!(list_var_name("i.0"), "i");
    assert_eq!(list_var_name("i.1"), "j");
    assert_eq!(list_var_name("b.2"), "d");
    assert_eq!(list_var_name("row.1"), "row1");
    assert_eq!(list_var_name("k"), "k");
}

#[test]
fn fresh_names_are_valid_and_distinct() {
    let mut n = Names::default();
    assert_eq!(n.fresh("h.0"), "h_0");
    assert_eq!(n.fresh("x"), "x");
    assert_eq!(n.fresh("x"), "x1");
    assert_eq!(n.fresh("0"), "t0");
    assert_eq!(n.fresh("sum"), "sum1");
}
