//! State in the model (issue 19): the applies that compute a state's update also run on every
//! node that reads the state (what `codegen::replicate` plans for the runtime, so that each
//! rank keeps its state between steps), and each such replica fetches its inputs there. This
//! module finds, per apply, the states it updates and, per state, the applies and sinks that
//! read it; `eval.rs` charges the replicas' bytes moved, memory and flops under a plan.
//! Not modelled: a replica's time (the schedule runs each apply on its own nodes), and a
//! replica making its node read another state (whose update the runtime then replicates too).

use super::{Input, Root};

/// Who reads and who updates the states of a graph.
#[derive(Clone, Debug, Default)]
pub(super) struct States {
    /// Per apply, the model's source indices of the states whose updates it writes.
    pub updates: Vec<Vec<usize>>,
    /// Per source (empty for a source that is not a state), the applies that read it and
    /// whether a sink reads it (on the sink node).
    pub readers: Vec<(Vec<usize>, bool)>,
    /// Per apply, the applies whose charges depend on its plan: the updates of the states it
    /// reads.
    pub dependents: Vec<Vec<usize>>,
}

fn reads_source(i: &Input, s: usize) -> bool {
    (i.roots.iter()).any(|r| matches!(r, Root::Source { index } if *index == s))
}

/// The states of a graph: `pairs` holds each state's source index and its update's sink index;
/// `inputs` is every apply's inputs, `sinks` every sink's input.
pub(super) fn states(
    pairs: &[(usize, usize)],
    inputs: &[&[Input]],
    sinks: &[Input],
    sources: usize,
) -> States {
    let n = inputs.len();
    let mut st = States {
        updates: vec![Vec::new(); n],
        readers: vec![(Vec::new(), false); sources],
        dependents: vec![Vec::new(); n],
    };
    for &(s, si) in pairs {
        let readers: Vec<usize> = (0..n)
            .filter(|&a| inputs[a].iter().any(|i| reads_source(i, s)))
            .collect();
        let sunk = sinks.iter().any(|i| reads_source(i, s));
        for r in (sinks[si].roots.iter()).filter_map(|r| match r {
            Root::Apply { apply, .. } => Some(*apply),
            _ => None,
        }) {
            if !st.updates[r].contains(&s) {
                st.updates[r].push(s);
            }
            for &a in &readers {
                if !st.dependents[a].contains(&r) {
                    st.dependents[a].push(r);
                }
            }
        }
        st.readers[s] = (readers, sunk);
    }
    st
}
