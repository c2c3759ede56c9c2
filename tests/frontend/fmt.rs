//! `tapc fmt` is lossless: comments and blank-line grouping survive it, it is idempotent, it
//! changes no meaning, and a file with errors is declined without touching it. Expected
//! outputs are written by hand, byte for byte.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use tapc::driver::{run, Outcome};

fn tapc(args: &[&str]) -> Outcome {
    run(&args.iter().map(|s| s.to_string()).collect::<Vec<_>>())
}

/// `text` written to a fresh file (tests run in parallel: one file per call).
fn write(name: &str, text: &str) -> PathBuf {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let d = std::env::temp_dir().join(format!("tapc-fmt-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    crate::common::remove_at_exit(&d);
    let f = d.join(name);
    std::fs::write(&f, text).unwrap();
    f
}

/// `tapc fmt` of `text` (exit code 0 asserted).
fn fmt(text: &str) -> String {
    let f = write("fmt.teg", text);
    let o = tapc(&["fmt", f.to_str().unwrap()]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    o.stdout
}

const COMMENTED: &str = "\
// The tour, with notes.

op @scale(x: f32[N]) -> (y: f32[N]) {   // elementwise
  // twice the input
  y[i] = x[i]*2.0
}
// a graph
graph @g {
  %a   =   zeros : f32[4]   // four zeros


  %b = apply @scale(
    %a   // the input
  )
  // the result
  sink @out %b

}
// end of file
";

const COMMENTED_FORMATTED: &str = "\
// The tour, with notes.

op @scale(x: f32[N]) -> (y: f32[N]) {  // elementwise
  // twice the input
  y[i] = x[i] * 2.0
}

// a graph
graph @g {
  %a = zeros : f32[4]  // four zeros

  // the input
  %b = apply @scale(%a) : f32[4]
  // the result
  sink @out %b
}
// end of file
";

#[test]
fn comments_and_blank_lines_survive() {
    assert_eq!(fmt(COMMENTED), COMMENTED_FORMATTED);
}

const EXTERN: &str = "\
graph @first {  // graphs may come before ops; the order is kept
  %x = source @x : f32[2, 3]
  %y = apply @mm(%x, %x)   // a Gram-like product


  // written out
  sink @y %y
}


// an op after the graph that applies it
extern op @mm(x: f32[M, K], w: f32[N, K]) -> (y: f32[M, N]) {
  // the index space
  index [i: M, j: N]
  x: [i, 0] + [1, K]   // a row

  w: [j, 0] + [1, K]
  y: [i, j] + [1, 1]
  // the cost model
  cost { i: {
    flops: 2 * K * N } }   // per row
}
";

const EXTERN_FORMATTED: &str = "\
graph @first {  // graphs may come before ops; the order is kept
  %x = source @x : f32[2, 3]
  %y = apply @mm(%x, %x) : f32[2, 2]  // a Gram-like product

  // written out
  sink @y %y
}

// an op after the graph that applies it
extern op @mm(x: f32[M, K], w: f32[N, K]) -> (y: f32[M, N]) {
  // the index space
  index [i: M, j: N]
  x: [i, 0] + [1, K]  // a row

  w: [j, 0] + [1, K]
  y: [i, j] + [1, 1]
  // the cost model
  cost { i: { flops: 2 * K * N } }  // per row
}
";

#[test]
fn extern_ops_and_graph_first_files_keep_their_comments() {
    assert_eq!(fmt(EXTERN), EXTERN_FORMATTED);
}

#[test]
fn formatting_is_idempotent_and_keeps_the_meaning() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut texts = vec![COMMENTED.to_string(), EXTERN.to_string()];
    for e in std::fs::read_dir(root.join("examples")).unwrap().flatten() {
        texts.push(std::fs::read_to_string(e.path()).unwrap());
    }
    for src in texts {
        let once = fmt(&src);
        assert_eq!(fmt(&once), once, "not idempotent on\n{src}");
        let emit = |t: &str| {
            let f = write("emit.teg", t);
            let o = tapc(&["opt", f.to_str().unwrap(), "--passes="]);
            assert_eq!(o.code, 0, "{}", o.stderr);
            o.stdout
        };
        assert_eq!(emit(&once), emit(&src), "meaning changed:\n{once}");
        // Every comment of the source is in the output.
        for c in src
            .lines()
            .filter_map(|l| l.find("//").map(|i| l[i..].trim_end()))
        {
            assert!(once.contains(c), "lost `{c}` from\n{src}\ngot\n{once}");
        }
    }
}

#[test]
fn a_canonical_file_is_printed_back_byte_for_byte() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let src = std::fs::read_to_string(root.join("tests/filetests/syntax/canonical.teg")).unwrap();
    assert_eq!(fmt(&src), src);
}

#[test]
fn a_file_with_errors_is_declined_and_left_untouched() {
    let src = "graph @g {  // keep me\n  %a = zeros : f32[2]\n  sink @s %b\n}\n";
    let f = write("broken.teg", src);
    let o = tapc(&["fmt", "--in-place", f.to_str().unwrap()]);
    assert_eq!(o.code, 1);
    assert!(o.stderr.contains("error[E0"), "{}", o.stderr);
    assert!(o.stdout.is_empty());
    assert_eq!(std::fs::read_to_string(&f).unwrap(), src);
}
