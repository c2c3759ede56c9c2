//! Linking a compiled module into an executable with the system `cc`: the kernels' object
//! file, the `tapc-runtime` static library (executor, `.npy` I/O, command line) and the C
//! libraries Rust's standard library needs.
//!
//! The runtime library is `$TAPC_RUNTIME_LIB`, or else the one built together with this `tapc`:
//! cargo builds the runtime's staticlib whenever it builds `tapc`, from the same compilation as
//! the rlib `tapc` links, and it exports a symbol named after that build
//! (`tapc_runtime::build::BUILD_ID`). It is looked for as `libtapc_runtime.a` next to the running
//! executable and `libtapc_runtime-*.a` in the `deps/` directory of its cargo profile and of the
//! profile recorded when `tapc` was compiled; a library of another build (another feature set in
//! the same target directory) is never picked.
//! A `--mpi` program links the runtime built with its `mpi` feature (`$TAPC_MPI_RUNTIME_LIB`,
//! or the one above when `tapc` itself was built with `--features mpi`) and Open MPI's libraries
//! as `mpicc --showme:link` names them; so does every program of a `tapc` built with
//! `--features mpi` (its one runtime library has MPI in it).

use std::path::{Path, PathBuf};
use std::process::Command;

/// Native libraries a Rust staticlib needs on Linux (`rustc --print native-static-libs`).
const NATIVE_LIBS: &[&str] = &[
    "-lgcc_s",
    "-lutil",
    "-lrt",
    "-lpthread",
    "-lm",
    "-ldl",
    "-lc",
];

/// The symbol that the staticlib of the runtime `tapc` was built with exports.
fn own_build_symbol() -> String {
    format!("TAPC_RUNTIME_BUILD_{}", tapc_runtime::build::BUILD_ID)
}

/// Whether the archive at `path` lists `symbol` in its symbol table (its first member, `/` or
/// `/SYM64/`, which `ar` and rustc write ahead of the objects).
pub fn archive_defines(path: &Path, symbol: &str) -> bool {
    use std::io::Read;
    let mut head = [0u8; 68];
    let Ok(mut f) = std::fs::File::open(path) else {
        return false;
    };
    if f.read_exact(&mut head).is_err() || &head[..8] != b"!<arch>\n" {
        return false;
    }
    let name = &head[8..24];
    if !(name.starts_with(b"/ ") || name.starts_with(b"/SYM64/")) {
        return false;
    }
    let size = std::str::from_utf8(&head[56..66])
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok());
    let Some(size) = size else { return false };
    let mut table = Vec::new();
    if f.take(size).read_to_end(&mut table).is_err() {
        return false;
    }
    let needle = format!("{symbol}\0");
    table.windows(needle.len()).any(|w| w == needle.as_bytes())
}

/// The runtime library in `dirs` that exports `symbol`: `libtapc_runtime.a` or cargo's
/// `libtapc_runtime-HASH.a`. A shared target directory holds one per feature set, so the
/// newest is not necessarily ours.
pub fn runtime_in(dirs: &[PathBuf], symbol: &str) -> Option<PathBuf> {
    dirs.iter()
        .filter_map(|d| std::fs::read_dir(d).ok())
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            let name = p.file_name().unwrap_or_default().to_string_lossy();
            name == "libtapc_runtime.a"
                || name.starts_with("libtapc_runtime-") && name.ends_with(".a")
        })
        .find(|p| archive_defines(p, symbol))
}

/// Where the runtime static library is.
pub fn runtime_lib() -> Result<PathBuf, String> {
    if let Some(p) = std::env::var_os("TAPC_RUNTIME_LIB") {
        let p = PathBuf::from(p);
        return if p.is_file() {
            Ok(p)
        } else {
            Err(format!("TAPC_RUNTIME_LIB={} is not a file", p.display()))
        };
    }
    let mut dirs: Vec<PathBuf> = Vec::new();
    if let Some(dir) = std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(Path::to_path_buf))
    {
        dirs.push(dir.clone());
        dirs.push(dir.join("deps"));
        if let Some(up) = dir.parent() {
            dirs.push(up.join("deps"));
        }
    }
    // OUT_DIR is <target>/<profile>/build/tapc-<hash>/out.
    if let Some(profile) = option_env!("OUT_DIR").and_then(|o| Path::new(o).ancestors().nth(3)) {
        dirs.push(profile.join("deps"));
    }
    let symbol = own_build_symbol();
    runtime_in(&dirs, &symbol).ok_or_else(|| format!("cannot find the tapc runtime library this tapc was built with (libtapc_runtime.a exporting `{symbol}`) next to the executable or in its cargo target directory; build tapc with cargo (which builds it) or set TAPC_RUNTIME_LIB to its path"))
}

/// The runtime library built with the `mpi` feature.
fn mpi_runtime_lib() -> Result<PathBuf, String> {
    match std::env::var_os("TAPC_MPI_RUNTIME_LIB") {
        Some(p) if Path::new(&p).is_file() => Ok(PathBuf::from(p)),
        Some(p) => Err(format!("TAPC_MPI_RUNTIME_LIB={} is not a file", Path::new(&p).display())),
        None if cfg!(feature = "mpi") => runtime_lib(),
        None => Err("`--mpi` needs the tapc runtime built with its `mpi` feature: build tapc with `cargo build --features mpi`, or build the runtime with `cargo build -p tapc-runtime --features mpi` and set TAPC_MPI_RUNTIME_LIB to its libtapc_runtime.a".into()),
    }
}

/// Open MPI's link flags (`mpicc --showme:link`).
fn mpi_link_flags() -> Result<Vec<String>, String> {
    let how = "`--mpi` needs Open MPI's `mpicc`: install it with `apt-get install libopenmpi-dev openmpi-bin`";
    let o = Command::new("mpicc")
        .arg("--showme:link")
        .output()
        .map_err(|e| format!("cannot run `mpicc --showme:link` ({e}); {how}"))?;
    if !o.status.success() {
        return Err(format!(
            "`mpicc --showme:link` failed ({}); {how}",
            o.status
        ));
    }
    Ok(String::from_utf8_lossy(&o.stdout)
        .split_whitespace()
        .map(str::to_string)
        .collect())
}

/// Links `obj` into the executable `out` with the runtime `rt` asks for (the caller stages
/// `out`: see `tapc_runtime::output`, which puts it in place only when everything was written).
pub fn link(obj: &Path, out: &Path, rt: super::Runtime) -> Result<(), String> {
    let (lib, mpi) = match rt {
        // Built with `--features mpi`, tapc finds only the runtime with MPI in it, which every
        // program then links with Open MPI (the local path does not call MPI).
        super::Runtime::Local if cfg!(feature = "mpi") => (runtime_lib()?, mpi_link_flags()?),
        super::Runtime::Local => (runtime_lib()?, vec![]),
        super::Runtime::Mpi => (mpi_runtime_lib()?, mpi_link_flags()?),
    };
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_string());
    let result = Command::new(&cc)
        .arg(obj)
        .arg(&lib)
        .args(&mpi)
        .args(NATIVE_LIBS)
        .arg("-Wl,--gc-sections,-S")
        .arg("-o")
        .arg(out)
        .output();
    match result {
        Err(e) => Err(format!("cannot run the linker `{cc}`: {e}")),
        Ok(o) if !o.status.success() => Err(format!(
            "linking with `{cc}` failed ({}):\n{}",
            o.status,
            String::from_utf8_lossy(&o.stderr).trim_end()
        )),
        Ok(_) => Ok(()),
    }
}
