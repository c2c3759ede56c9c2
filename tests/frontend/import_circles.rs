//! No two files of one crate use each other (issue 24): an import circle between files makes
//! neither understandable, testable or movable alone. The check reads every file's `mod` and
//! `use` lines and its `crate::`/`super::`/`self::` paths in code (`modules`, on a tokenizer
//! that drops comments and literals: `lexer`), for the crates `tapc` (`src/`, with `passes/`
//! mounted at `crate::passes`), the `tapc` binary and `tapc-runtime` (`runtime/src/`), and
//! fails naming every pair of files that use each other (a `mod.rs` and its own submodules'
//! files are one unit: their pairs are printed, not counted; see `modules`). The detector
//! itself is tested on small planted trees below.

mod lexer;
mod modules;

use modules::{Crate, Use};
use std::path::{Path, PathBuf};

/// The crate roots checked, relative to the package root.
const ROOTS: &[&str] = &["src/lib.rs", "src/main.rs", "runtime/src/lib.rs"];

/// The folders whose every `.rs` file must belong to one of [`ROOTS`]' crates.
const FOLDERS: &[&str] = &["src", "passes", "runtime/src"];

fn package_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Every `.rs` file under `dir` (also used by `no_lib_tests`).
pub fn rs_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            rs_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

fn describe(u: &Use, root: &Path) -> String {
    let rel = |p: &Path| p.strip_prefix(root).unwrap_or(p).display().to_string();
    format!("{}:{} `{}`", rel(&u.from), u.line, u.path)
}

#[test]
fn no_two_files_of_a_crate_use_each_other() {
    let root = package_root();
    let mut covered = Vec::new();
    let mut found = Vec::new();
    for r in ROOTS {
        let c = Crate::load(&root.join(r)).unwrap_or_else(|e| panic!("{r}: {e}"));
        covered.extend(c.files().into_iter().map(Path::to_path_buf));
        let (circles, nested) = c.circles();
        for (a, b) in &nested {
            println!(
                "not a circle: {} / {}",
                describe(a, root),
                describe(b, root)
            );
        }
        for (a, b) in circles {
            found.push(format!(
                "{} and {} use each other: {} / {}",
                a.from.strip_prefix(root).unwrap().display(),
                b.from.strip_prefix(root).unwrap().display(),
                describe(&a, root),
                describe(&b, root)
            ));
        }
    }
    let mut all = Vec::new();
    for f in FOLDERS {
        rs_files(&root.join(f), &mut all);
    }
    let unread: Vec<_> = all.iter().filter(|f| !covered.contains(f)).collect();
    assert!(
        unread.is_empty(),
        "files in no crate's module tree: {unread:?}"
    );
    assert!(all.len() > 50, "only {} files read", all.len());
    assert!(
        found.is_empty(),
        "{} import circle(s):\n{}",
        found.len(),
        found.join("\n")
    );
}

/// A crate planted in a fresh temporary folder: `(path, text)` files, `src/lib.rs` the root.
fn planted(tag: &str, files: &[(&str, &str)]) -> (PathBuf, Crate) {
    let dir = crate::common::scratch(&format!("import-circles-{tag}"));
    for (path, text) in files {
        let p = dir.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    let c = Crate::load(&dir.join("src/lib.rs")).unwrap_or_else(|e| panic!("{tag}: {e}"));
    (dir, c)
}

/// The circles of a planted crate as `(file, file)` names relative to its folder.
fn planted_circles(tag: &str, files: &[(&str, &str)]) -> Vec<(String, String)> {
    let (dir, c) = planted(tag, files);
    let rel = |p: &Path| p.strip_prefix(&dir).unwrap().display().to_string();
    let found = c
        .circles()
        .0
        .iter()
        .map(|(a, b)| (rel(&a.from), rel(&b.from)))
        .collect();
    std::fs::remove_dir_all(&dir).unwrap();
    found
}

fn pair(a: &str, b: &str) -> Vec<(String, String)> {
    vec![(a.to_string(), b.to_string())]
}

#[test]
fn a_circle_through_crate_paths_is_found() {
    let found = planted_circles(
        "crate",
        &[
            ("src/lib.rs", "mod a;\nmod b;\n"),
            ("src/a.rs", "use crate::b::thing;\npub fn f() {}\n"),
            ("src/b.rs", "pub fn thing() { crate::a::f() }\n"),
        ],
    );
    assert_eq!(found, pair("src/a.rs", "src/b.rs"));
}

#[test]
fn one_way_uses_are_no_circle() {
    let found = planted_circles(
        "oneway",
        &[
            ("src/lib.rs", "mod a;\nmod b;\npub use a::f;\n"),
            (
                "src/a.rs",
                "use crate::b::{self, thing};\npub fn f() { b::thing() }\n",
            ),
            (
                "src/b.rs",
                "// crate::a::f in a comment\npub fn thing() { let _ = \"crate::a\"; }\n",
            ),
        ],
    );
    assert_eq!(found, vec![]);
}

#[test]
fn super_paths_resolve_to_the_parent_and_sibling_files() {
    let found = planted_circles(
        "super",
        &[
            ("src/lib.rs", "mod m;\n"),
            ("src/m/mod.rs", "mod x;\nmod y;\npub struct S;\n"),
            ("src/m/x.rs", "use super::y::Y;\npub struct X;\n"),
            (
                "src/m/y.rs",
                "pub struct Y;\nfn f(_: super::x::X) {}\nmod tests {\n    use super::*;\n}\n",
            ),
        ],
    );
    assert_eq!(found, pair("src/m/x.rs", "src/m/y.rs"));
}

/// A module's file and its submodule's file using each other are one unit, not a circle.
#[test]
fn a_parent_and_its_child_are_no_circle() {
    let (dir, c) = planted(
        "parent",
        &[
            ("src/lib.rs", "mod m;\n"),
            ("src/m/mod.rs", "mod x;\npub use x::X;\npub struct S;\n"),
            ("src/m/x.rs", "use super::S;\npub struct X;\n"),
        ],
    );
    let (circles, nested) = c.circles();
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(circles, vec![]);
    assert_eq!(nested.len(), 1, "{nested:?}");
}

#[test]
fn grouped_and_nested_uses_are_expanded() {
    let found = planted_circles(
        "grouped",
        &[
            ("src/lib.rs", "pub mod p;\npub mod q;\n"),
            ("src/p/mod.rs", "pub mod deep;\n"),
            (
                "src/p/deep.rs",
                "use crate::{q::{self as other, *}, p};\npub fn d() {}\n",
            ),
            ("src/q.rs", "pub use crate::{p::{deep::d}};\n"),
        ],
    );
    assert_eq!(found, pair("src/p/deep.rs", "src/q.rs"));
}

#[test]
fn path_mounted_folders_and_inline_modules_are_read() {
    let (dir, c) = planted(
        "mounted",
        &[
            (
                "src/lib.rs",
                "#[path = \"../passes/mod.rs\"]\npub mod passes;\nmod util {\n    pub fn u() {}\n}\n",
            ),
            ("passes/mod.rs", "pub mod cost;\n"),
            ("passes/cost.rs", "use crate::util::u;\n"),
        ],
    );
    let uses = c.uses();
    assert_eq!(c.files().len(), 3, "{:?}", c.files());
    assert_eq!(uses.len(), 1, "{uses:?}");
    assert_eq!(uses[0].from, dir.join("passes/cost.rs"));
    assert_eq!(uses[0].to, dir.join("src/lib.rs"));
    std::fs::remove_dir_all(&dir).unwrap();
}
