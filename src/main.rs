//! The `tapc` binary: a thin shell around [`tapc::driver::run_with`], and [`tapc::lsp`] for
//! `tapc lsp`, which owns stdin and stdout.
use std::io::{IsTerminal, Write};

fn main() {
    // First, before any thread exists: SIGINT/SIGTERM remove unfinished outputs, SIGXFSZ is a
    // write error (tapc_runtime::signals).
    tapc_runtime::signals::install();
    // As bytes: a path need not be UTF-8.
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    if tapc::driver::is_lsp(&args) {
        std::process::exit(tapc::lsp::run_stdio());
    }
    let console = tapc::driver::Console {
        terminal: std::io::stderr().is_terminal(),
        log: tapc_runtime::steps::LogTo::Stdout,
    };
    let out = tapc::driver::run_with(&args, console);
    let _ = std::io::stdout().write_all(out.stdout.as_bytes());
    let _ = std::io::stderr().write_all(out.stderr.as_bytes());
    std::process::exit(out.code);
}
