//! `mean[k..](e)` (docs/teg.md §5.2): the sum divided by the number of points, in the
//! interpreter and the JIT, whole and sharded along the rows, against values written here (means of
//! `iota` rows and of the whole tensor, f32 and f64), and an empty range gives NaN.

use std::collections::HashMap;
use tapc::codegen::{run_jit, Options};

const SRC: &str = "\
op @rowmean(x: f32[M, N]) -> (y: f32[M]) {
  y[i] = mean[j](x[i, j])
}

op @allmean(x: f64[M, N]) -> (z: f64[]) {
  z[] = mean[i, j](x[i, j] * 2.0)
}

op @empty(x: f32[M, N]) -> (e: f32[M]) {
  e[i] = mean[j](x[i, j])
}

graph @g {
  %x = iota axis 1 : f32[37, 10]
  %d = iota axis 0 : f64[6, 5]
  %n = zeros : f32[3, 0]
  %y = apply @rowmean(%x)
  %z = apply @allmean(%d)
  %e = apply @empty(%n)
  sink @y %y
  sink @z %z
  sink @e %e
}
";

fn check(what: &str, sinks: &HashMap<String, tapc_runtime::Tensor>) {
    let f = crate::common::f64s;
    // Row j of iota axis 1 over 10 columns: mean of 0..9 = 4.5.
    assert_eq!(f(&sinks["y"]), vec![4.5; 37], "{what}");
    // 2 * mean of iota axis 0 over 6 rows: 2 * 2.5 = 5.
    assert_eq!(f(&sinks["z"]), [5.0], "{what}");
    assert!(f(&sinks["e"]).iter().all(|v| v.is_nan()), "{what}");
}

#[test]
fn mean_divides_the_sum_by_the_count_in_every_runtime() {
    for pipeline in ["canonicalize", "canonicalize,shard,fuse"] {
        let (m, facts) = crate::common::after_pipeline("mean", SRC, pipeline);
        let interp = crate::common::run(&m, &facts, 0, &HashMap::new());
        check(&format!("interp {pipeline}"), &interp);
        let opts = tapc_runtime::exec::Options {
            threads: 2,
            record: false,
        };
        let (jit, _) = run_jit(
            &m,
            0,
            &facts[0],
            &HashMap::new(),
            &Options::default(),
            &opts,
        )
        .unwrap();
        check(&format!("jit {pipeline}"), &jit.into_iter().collect());
    }
}
