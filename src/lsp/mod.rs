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
pub mod transport;

pub use server::{Stats, DEBOUNCE, STATS_METHOD};

/// Serves the Language Server Protocol on stdin/stdout until the client shuts it down; the
/// process exit code (0 after shutdown and exit, 1 after an exit without shutdown or an I/O
/// error). Framing and JSON errors are logged to stderr (see [`transport`]).
pub fn run_stdio() -> i32 {
    let log: transport::Log = std::sync::Arc::new(std::sync::Mutex::new(std::io::stderr()));
    // The reader may be blocked on a stdin the client keeps open: it is not waited for.
    serve_streams(std::io::stdin(), std::io::stdout(), log, false).unwrap_or_else(|e| {
        eprintln!("tapc lsp: {e}");
        1
    })
}

/// Serves one session read from `input` and written to `output` (the fuzzers run the server
/// in-process this way): its exit code, or `Err` when a thread of the server panicked. With
/// `wait_for_reader` the reader of `input` is joined too (it ends with the input).
pub fn serve_streams(
    input: impl std::io::Read + Send + 'static,
    output: impl std::io::Write + Send + 'static,
    log: transport::Log,
    wait_for_reader: bool,
) -> Result<i32, String> {
    let (conn, threads) = transport::connect(input, output, log.clone());
    let served =
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| server::serve(&conn, &log)));
    drop(conn); // the writer ends when the last sender is gone
    let written = threads.join(wait_for_reader)?;
    let code = match served {
        Err(_) => return Err("the server loop panicked".into()),
        Ok(Ok(true)) => 0,
        Ok(Ok(false)) => 1,
        Ok(Err(e)) => {
            transport::log(&log, &e.to_string());
            1
        }
    };
    if let Err(e) = written {
        transport::log(&log, &format!("writing: {e}"));
        return Ok(1);
    }
    Ok(code)
}
