//! IR back to text. `text` prints canonical TEG (`--emit teg`, hovers, and line by line
//! for the lossless formatter of `tapc fmt`, [`crate::format`]); `signature` prints the signature derived for one apply
//! (`--emit signature`, hovers on an apply). It depends on the IR only.

mod signature;
mod text;

pub use signature::{apply_signature, scatter_signature};
pub use text::{
    gather_text, graph_lines, iexpr_text, kexpr_text, node_text, op_lines, print_graph,
    print_module, print_op, scatter_text, Line,
};
