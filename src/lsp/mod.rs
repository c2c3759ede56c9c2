//! `tapc lsp`: a language server over stdio (lsp-server + lsp-types, as rust-analyzer).
//!
//! [`run_stdio`] is the whole API. Each open document is compiled with
//! [`crate::compile_source`]; diagnostics, hover, completion, signature help, rename, semantic tokens, navigation, symbols, formatting,
//! quick fixes and inlay hints are answered from that result and from a token scan of the text
//! ([`names`]), so navigation also works in files that do not compile.

mod analysis;
mod complete;
mod context;
pub mod edits;
mod hover;
pub mod line_index;
pub mod names;
mod nav;
mod rename;
mod semantic;
mod server;
mod sighelp;

/// Serves the Language Server Protocol on stdin/stdout until the client shuts it down; the
/// process exit code (0 after shutdown and exit, 1 after an exit without shutdown or an I/O
/// error).
pub fn run_stdio() -> i32 {
    let (conn, io_threads) = lsp_server::Connection::stdio();
    let result = server::serve(&conn);
    drop(conn); // the writer thread ends when the last sender is gone
    let joined = io_threads.join();
    match (result, joined) {
        (Ok(true), Ok(())) => 0,
        (Ok(false), _) => 1,
        (Err(e), _) => {
            eprintln!("tapc lsp: {e}");
            1
        }
        (_, Err(e)) => {
            eprintln!("tapc lsp: {e}");
            1
        }
    }
}
