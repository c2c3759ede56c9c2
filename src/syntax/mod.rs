//! Front end: text to syntax tree (lexer + lalrpop parser), and IR back to text (printer).
//!
//! [`parse`] never gives up: it returns a tree with `Error` nodes plus diagnostics.

pub mod ast;
mod instr;
pub mod lexer;
pub mod lower;
mod parser;
pub mod printer;

pub use parser::parse;
