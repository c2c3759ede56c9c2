//! IR back to text. `text` prints canonical TEG (`tapc fmt`, `--emit teg`, the language
//! server's formatting and hovers); `signature` prints the signature derived for one apply
//! (`--emit signature`, hovers on an apply). It depends on the IR only.

mod signature;
mod text;

pub use signature::apply_signature;
pub use text::{iexpr_text, kexpr_text, node_text, print_graph, print_module, print_op};
