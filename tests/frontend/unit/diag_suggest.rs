//! Unit tests of `tapc::diag::suggest`, kept out of the library so that `cargo test` compiles it once.

use tapc::diag::suggest::{closest, edit_distance};

#[test]
fn closest_within_two_edits() {
    assert_eq!(closest("aply", ["apply", "source"]), Some("apply"));
    assert_eq!(closest("xyzzy", ["apply", "source"]), None);
    assert_eq!(edit_distance("kitten", "sitting"), 3);
}
