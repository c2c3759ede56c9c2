//! Applies of an op that failed to lower (an error in its body, a port that did not lower, or
//! a header that did not parse): they are checked against the part of the op's header that is
//! known (its [`Stub`]) and typed from its known output ports. What is unknown is poisoned,
//! never reported.

use super::bind::{
    arity_error, at_argument, bind_ports, output_shape, with_port_dtypes, Ports, Site,
};
use crate::diag::Diagnostic;
use crate::ir::graph::ApplySpans;
use crate::ir::kernel::{OpBody, OpDef, Stub};
use crate::ir::TensorType;

/// Checks an apply of `stub` (unsharded) that binds `results` names, with its arguments' types
/// (`None`: poisoned): its diagnostics, and per result its type where the header gives it.
pub(super) fn check_apply(
    stub: &Stub,
    params: &[(String, i64)],
    args: &[Option<TensorType>],
    spans: &ApplySpans,
    results: usize,
    site: Site,
) -> (Vec<Diagnostic>, Vec<Option<TensorType>>) {
    let unknown = vec![None; results];
    if let Some(ins) = stub.inputs.as_ref().filter(|ins| ins.len() != args.len()) {
        let d = arity_error(&stub.name, ins.len(), args.len(), stub.name_span, site);
        return (vec![d], unknown);
    }
    // Only the known ports with typed arguments are bound.
    let mut known = (Vec::new(), Vec::new(), Vec::new());
    for (k, port) in stub.inputs.iter().flatten().enumerate() {
        if let (Some(p), Some(a)) = (port, &args[k]) {
            known.0.push(p.clone());
            known.1.push(a.clone());
            known.2.extend(spans.args.get(k));
        }
    }
    let ports = if stub
        .inputs
        .as_ref()
        .is_some_and(|i| i.len() == known.0.len())
    {
        Ports::All
    } else {
        Ports::Known
    };
    let op = OpDef {
        name: stub.name.clone(),
        // Unknown parameters: whatever the apply gives is taken.
        params: stub
            .params
            .clone()
            .unwrap_or_else(|| params.iter().map(|p| p.0.clone()).collect()),
        inputs: known.0,
        outputs: Vec::new(),
        body: OpBody::Kernel(Vec::new()),
        span: stub.name_span,
        name_span: stub.name_span,
    };
    let (ds, b) = match bind_ports(&op, params, &spans.params, &known.1, ports, site) {
        Ok(b) => (Vec::new(), b),
        Err(ds) => {
            let ds = ds
                .into_iter()
                .map(|d| at_argument(d, &op, &known.2, site.span))
                .collect();
            let typed = with_port_dtypes(&op, &known.1);
            match bind_ports(&op, params, &spans.params, &typed, ports, site) {
                Ok(b) => (ds, b),
                Err(_) => return (ds, unknown),
            }
        }
    };
    let Some(outs) = &stub.outputs else {
        return (ds, unknown);
    };
    let tys = outs
        .iter()
        .map(|p| {
            let p = p.as_ref()?;
            let shape = output_shape(&b, p, site).ok()?;
            Some(TensorType::new(p.dtype, shape))
        })
        .collect();
    (ds, tys)
}
