//! Signature help (`textDocument/signatureHelp`) inside `apply @op<...>(...)`: the op's header
//! with the parameter (in `<...>`) or input port (in `(...)`) at the cursor active.

use super::analysis::Document;
use super::complete::{op_param_names, op_ports};
use super::context::Context;

/// The signature at the cursor: its label, the byte ranges of its parameters within the
/// label, and which one is active.
pub struct Help {
    pub label: String,
    pub params: Vec<std::ops::Range<usize>>,
    pub active: usize,
}

pub fn signature_help(doc: &Document, offset: usize) -> Option<Help> {
    let call = Context::at(doc, offset).apply?;
    let (inputs, outputs) = op_ports(doc, &call.op);
    let names = op_param_names(doc, &call.op);
    let mut label = format!("@{}", call.op);
    let mut params = Vec::new();
    let mut list = |label: &mut String, items: &[String], open: &str, close: &str, record: bool| {
        label.push_str(open);
        for (i, it) in items.iter().enumerate() {
            if i > 0 {
                label.push_str(", ");
            }
            if record {
                params.push(label.len()..label.len() + it.len());
            }
            label.push_str(it);
        }
        label.push_str(close);
    };
    if !names.is_empty() {
        list(&mut label, &names, "<", ">", call.in_params);
    }
    list(&mut label, &inputs, "(", ")", !call.in_params);
    list(&mut label, &outputs, " -> (", ")", false);
    Some(Help {
        label,
        params,
        active: call.index,
    })
}
