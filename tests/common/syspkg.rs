//! Makes sure a system tool a test needs is on this machine: installs its Debian packages when it
//! is missing and we are root (as CI is), and otherwise fails with how to install it. Never skips.

use std::process::Command;
use std::sync::Mutex;

/// One install at a time inside a test binary; apt's own lock serializes across processes.
static APT: Mutex<()> = Mutex::new(());

/// Whether `program` runs (`program --version` exits at all).
pub fn available(program: &str) -> bool {
    Command::new(program)
        .arg("--version")
        .output()
        .map(|o| o.status.success() || !o.stdout.is_empty())
        .unwrap_or(false)
}

/// Ensures `program` is available, installing `packages` with apt-get when it is not.
/// Panics with a how-to-install message when that cannot be done, so a test never skips.
pub fn ensure(program: &str, packages: &[&str]) {
    ensure_with(&format!("`{program}`"), &|| available(program), packages);
}

/// Ensures one of `files` exists (e.g. a library), installing `packages` when none does.
pub fn ensure_file(files: &[&str], packages: &[&str]) {
    let present = || files.iter().any(|f| std::path::Path::new(f).exists());
    ensure_with(&files.join(" or "), &present, packages);
}

fn ensure_with(what: &str, present: &dyn Fn() -> bool, packages: &[&str]) {
    let _guard = APT.lock().unwrap_or_else(|e| e.into_inner());
    if present() {
        return;
    }
    let how = format!(
        "this test needs {what}; install it with: apt-get update && apt-get install -y {}",
        packages.join(" ")
    );
    if !is_root() {
        panic!("{what} is missing and this test is not running as root to install it; {how}");
    }
    let apt = |args: &[&str]| {
        Command::new("apt-get")
            .args(["-o", "DPkg::Lock::Timeout=600", "-q"])
            .args(args)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .output()
    };
    let result = apt(&["update"]).and_then(|_| {
        let mut args = vec!["install", "-y", "--no-install-recommends"];
        args.extend_from_slice(packages);
        apt(&args)
    });
    match result {
        Ok(out) if out.status.success() && present() => {}
        Ok(out) => panic!(
            "installing {} failed ({}): {}\n{how}",
            packages.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ),
        Err(e) => panic!("cannot run apt-get ({e}); {how}"),
    }
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}
