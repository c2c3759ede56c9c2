//! Unit tests of `tapc::passes::alias::analysis`, kept out of the library so that `cargo test` compiles it once.

use std::collections::BTreeSet;
use tapc::diag::codes;
use tapc::ir::graph::{Graph, ValueId};
use tapc::ir::Module;
use tapc::passes::alias::analysis::*;
use tapc::passes::alias::region::Region;
use tapc::passes::alias::regions::Regions;
use tapc::passes::alias::sett::Sett;

pub fn compile(src: &str) -> (Module, Vec<tapc::verify::GraphFacts>) {
    let (m, facts, diags) = tapc::compile_source(src);
    assert!(
        !diags.has_errors(),
        "{}\n{src}",
        tapc::diag::render_human("t.teg", src, &diags.0, false)
    );
    (m, facts)
}

/// The analysis of the only graph of `src`, plus a name lookup.
fn analyzed(src: &str) -> (Graph, AliasInfo) {
    let (m, _) = compile(src);
    let g = m.graphs[0].clone();
    let info = analyze(&g).expect("analysis succeeds");
    (g, info)
}

pub fn id(g: &Graph, name: &str) -> ValueId {
    g.find_value(name)
        .unwrap_or_else(|| panic!("no value %{name}"))
}

/// The flat indices (row-major) of root `root` in a footprint.
pub fn flat(info: &AliasInfo, fp: &[(ValueId, Regions)], root: ValueId) -> BTreeSet<i64> {
    let shape = info.value_type(root).shape.clone();
    let Some((_, r)) = fp.iter().find(|(x, _)| *x == root) else {
        return BTreeSet::new();
    };
    (0..volume(&shape) as i64)
        .filter(|&i| r.contains_point(&unravel(i, &shape)))
        .collect()
}

pub fn unravel(mut lin: i64, shape: &[i64]) -> Vec<i64> {
    let mut c = vec![0; shape.len()];
    for d in (0..shape.len()).rev() {
        c[d] = lin % shape[d];
        lin /= shape[d];
    }
    c
}

#[test]
fn worked_cases() {
    let (g, info) = analyzed(
        "graph @g {
          %a = source @a : f32[24]
          %m = reshape %a [4, 6]
          %b = slice %m [0:4, 3:6]
          %c = slice %a [0:24:7]
          %a27 = source @a27 : f32[27]
          %cube = reshape %a27 [3, 3, 3]
          %corner = slice %cube [0:2, 0:2, 0:2]
          %five = slice %a27 [2::5]
          %a10 = source @a10 : f32[10]
          %back = slice %a10 [8:2:-2]
          %fwd = slice %a10 [4:10:2]
        }",
    );
    let v = |n| id(&g, n);
    let a = v("a");
    assert!(info.aliases(v("b"), v("c")).unwrap());
    let o = info.overlap(v("b"), v("c")).unwrap();
    assert_eq!(flat(&info, &o, a), BTreeSet::from([21]));
    assert_eq!(
        flat(&info, info.footprint(v("b")), a),
        [3, 4, 5, 9, 10, 11, 15, 16, 17, 21, 22, 23].into()
    );
    assert!(info.aliases(v("corner"), v("five")).unwrap());
    let o = info.overlap(v("corner"), v("five")).unwrap();
    assert_eq!(flat(&info, &o, v("a27")), BTreeSet::from([12]));
    // Same footprint, both ways round.
    let (bk, fw) = (v("back"), v("fwd"));
    assert!(info.contains(bk, fw).unwrap() && info.contains(fw, bk).unwrap());
    assert_eq!(info.footprint(bk), info.footprint(fw));
    assert!(
        !info.aliases(v("b"), bk).unwrap(),
        "different roots never alias"
    );
    assert!(info.contains(a, v("b")).unwrap() && !info.contains(v("b"), a).unwrap());
    for n in ["a", "m", "b", "c", "corner", "five", "back", "fwd"] {
        assert!(!info.has_self_aliases(v(n)).unwrap(), "%{n}");
    }
}

#[test]
fn concat_interleave_repeat_and_pad() {
    let (g, info) = analyzed(
        "graph @g {
          %a = source @a : f32[8]
          %lo = slice %a [0:4]
          %hi = slice %a [4:8]
          %cat = concat %hi, %lo axis 0
          %even = slice %a [0:8:2]
          %odd = slice %a [1:8:2]
          %zip = interleave %even, %odd axis 0
          %twice = interleave %even, %even axis 0
          %rep = repeat %lo times 3 axis 0
          %rep1 = repeat %lo times 1 axis 0
          %rep0 = repeat %lo times 0 axis 0
          %padc = pad %even [2:3] constant 0
          %padr = pad %odd [1:2] reflect
          %b = source @b : f32[4]
          %mix = concat %lo, %b axis 0
          %cc = concat %lo, %lo axis 0
        }",
    );
    let v = |n| id(&g, n);
    let (a, b) = (v("a"), v("b"));
    // Concatenating the halves covers all of %a, once.
    assert!(info.contains(v("cat"), a).unwrap() && info.contains(a, v("cat")).unwrap());
    assert!(!info.has_self_aliases(v("cat")).unwrap());
    assert!(!info.aliases(v("lo"), v("hi")).unwrap());
    // Interleaving the even and odd elements is %a again; with itself it self-aliases.
    assert_eq!(flat(&info, info.footprint(v("zip")), a).len(), 8);
    assert!(!info.has_self_aliases(v("zip")).unwrap());
    assert!(info.has_self_aliases(v("twice")).unwrap());
    assert_eq!(info.footprint(v("twice")), info.footprint(v("even")));
    assert!(!info.aliases(v("even"), v("odd")).unwrap());
    // Repeat folds its copies.
    assert_eq!(info.footprint(v("rep")), info.footprint(v("lo")));
    assert!(info.has_self_aliases(v("rep")).unwrap() && !info.has_self_aliases(v("rep1")).unwrap());
    assert!(info.footprint(v("rep0")).is_empty() && !info.has_self_aliases(v("rep0")).unwrap());
    // Constant padding reads nothing; reflect padding reads elements twice.
    assert_eq!(info.footprint(v("padc")), info.footprint(v("even")));
    assert_eq!(info.backed_elements(v("padc")).unwrap(), 4);
    assert!(!info.has_self_aliases(v("padc")).unwrap());
    assert!(info.has_self_aliases(v("padr")).unwrap());
    assert_eq!(
        flat(&info, info.footprint(v("padr")), a),
        [1, 3, 5, 7].into()
    );
    // Several roots.
    let mix = info.footprint(v("mix"));
    assert_eq!(mix.len(), 2);
    assert_eq!(flat(&info, mix, a), [0, 1, 2, 3].into());
    assert_eq!(flat(&info, mix, b).len(), 4);
    assert!(info.aliases(v("mix"), b).unwrap() && info.aliases(v("mix"), v("cat")).unwrap());
    assert!(!info.aliases(v("mix"), v("hi")).unwrap());
    assert!(
        info.contains(v("mix"), v("lo")).unwrap() && !info.contains(v("lo"), v("mix")).unwrap()
    );
    assert!(info.has_self_aliases(v("cc")).unwrap());
    // Sub-regions: the second half of %cat is %lo; odd positions of %zip are %odd.
    let fp = info.footprint_of_box(v("cat"), &[(4, 8)]).unwrap();
    assert_eq!(flat(&info, &fp, a), [0, 1, 2, 3].into());
    let odd_pos = Region::new(vec![8], vec![Sett::from_triples(&[(1, 1, 1)]).unwrap()]).unwrap();
    let fp = info.footprint_of_region(v("zip"), &odd_pos).unwrap();
    assert_eq!(flat(&info, &fp, a), [1, 3, 5, 7].into());
    let fp = info.footprint_of_box(v("padc"), &[(0, 2)]).unwrap();
    assert!(fp.is_empty(), "constant padding reads no memory");
}

#[test]
fn broadcast_self_aliases_and_tiles_map_to_blocks() {
    let (g, info) = analyzed(
        "graph @g {
          %a = source @a : f32[8, 8]
          %row = slice %a [2:3, 0:8]
          %bc = broadcast %row [5, 8]
          %r = reshape %a [4, 2, 4, 2]
          %t = transpose %r [0, 2, 1, 3]
          %z = zeros : f32[3]
          %zz = broadcast %z [2, 3]
        }",
    );
    let v = |n| id(&g, n);
    let a = v("a");
    assert!(info.has_self_aliases(v("bc")).unwrap());
    assert_eq!(info.footprint(v("bc")), info.footprint(v("row")));
    assert!(info.has_self_aliases(v("zz")).unwrap());
    assert_eq!(info.root_kind(v("z")), Some(&RootKind::Generator("zeros")));
    assert!(!info.has_self_aliases(v("t")).unwrap());
    // Tile (1, 2) of %t is the 2x2 block at rows 2..4, columns 4..6 of %a.
    let fp = info
        .footprint_of_box(v("t"), &[(1, 2), (2, 3), (0, 2), (0, 2)])
        .unwrap();
    assert_eq!(flat(&info, &fp, a), [20, 21, 28, 29].into());
    // The top-left corners of all tiles: even rows and even columns.
    let fp = info
        .footprint_of_box(v("t"), &[(0, 4), (0, 4), (0, 1), (0, 1)])
        .unwrap();
    let want: BTreeSet<i64> = (0..64).filter(|i| (i / 8) % 2 == 0 && i % 2 == 0).collect();
    assert_eq!(flat(&info, &fp, a), want);
    // A region of the wrong shape is an error, not a panic.
    let r = Region::full(&[3]).unwrap();
    let e = info.footprint_of_region(v("t"), &r).unwrap_err();
    assert_eq!((e.kind, e.value.as_str()), (AliasErrorKind::BadQuery, "t"));
    assert!(e.to_diagnostic().notes.is_empty());
    let e = info.footprint_of_box(v("t"), &[(0, 1)]).unwrap_err();
    assert_eq!(e.kind, AliasErrorKind::BadQuery);
    assert_eq!(e.to_diagnostic().code, Some(codes::PASS_FAILED));
}

#[test]
fn apply_outputs_are_roots_and_reports_are_deterministic() {
    let src = "op @two(x: f32[N]) -> (y: f32[N], z: f32[N]) {
          y[i] = x[i]
          z[i] = x[i] * 2.0
        }
        graph @g {
          %a = source @a : f32[6]
          %y, %z = apply @two(%a)
          %ys = slice %y [1:3]
          %zs = slice %z [1:3]
          %yy = slice %y [2:6:2]
        }";
    let (g, info) = analyzed(src);
    let v = |n| id(&g, n);
    assert!(info.is_root(v("y")) && info.is_root(v("z")));
    assert!(!info.aliases(v("ys"), v("zs")).unwrap());
    assert!(!info.aliases(v("ys"), v("a")).unwrap());
    assert!(info.aliases(v("ys"), v("yy")).unwrap());
    let report = info.report().unwrap();
    assert_eq!(report, analyzed(src).1.report().unwrap());
    assert!(report.contains("%y: root (apply @two) f32[6]"), "{report}");
    assert!(report.contains("%ys ~ %yy at %y: {[(1,5,2)]}"), "{report}");
    assert!(!report.contains("%ys ~ %zs"), "{report}");
}

#[test]
fn unverified_graphs_and_bad_options_are_errors() {
    let (m, _) = compile("graph @g {\n %a = source @a : f32[4]\n %b = slice %a [1:3]\n}");
    let mut g = m.graphs[0].clone();
    g.values[1].ty = None;
    let e = analyze(&g).unwrap_err();
    assert_eq!(
        (e.kind, e.value.as_str()),
        (AliasErrorKind::Unverified, "b")
    );
    assert!(e.message.contains("verified"), "{}", e.message);
    assert!(create(&[("x".into(), "1".into())]).is_err());
    assert!(create(&[]).is_ok());
}

#[test]
fn footprints_the_algebra_cannot_represent_are_errors() {
    let (m, _) = compile(
        "graph @g {
          %a = source @a : f32[100000, 100003]
          %t = transpose %a [1, 0]
          %f = reshape %t [10000300000]
          %s = slice %f [0:10000300000:99991]
        }",
    );
    let e = analyze(&m.graphs[0]).unwrap_err();
    assert_eq!(
        (e.kind, e.value.as_str()),
        (AliasErrorKind::TooComplex, "s")
    );
    assert!(
        e.message.contains("`reshape` defining `%f`"),
        "{}",
        e.message
    );
    let d = e.to_diagnostic();
    assert_eq!((d.code, d.notes.len()), (Some(codes::PASS_FAILED), 1));
}

#[test]
fn huge_shapes_are_analysed_without_enumeration() {
    let n = 1i64 << 20;
    let src = format!(
        "graph @g {{
          %a = source @a : f32[{n}, {n}]
          %r = reshape %a [{h}, 2, {h}, 2]
          %t = transpose %r [0, 2, 1, 3]
          %tl = slice %t [0:{h}, 0:{h}, 0:1, 0:1]
          %br = slice %t [0:{h}, 0:{h}, 1:2, 1:2]
          %col = slice %a [0:{n}, 3:4]
        }}",
        h = n / 2
    );
    let (g, info) = analyzed(&src);
    let v = |s| id(&g, s);
    assert!(!info.aliases(v("tl"), v("br")).unwrap());
    assert!(!info.aliases(v("tl"), v("col")).unwrap());
    assert!(info.aliases(v("br"), v("col")).unwrap());
    assert!(info.contains(v("t"), v("tl")).unwrap());
    assert_eq!(info.footprint_count(v("tl")), (n as i128 * n as i128) / 4);
}
