//! Linking a compiled module into an executable with the system `cc`: the kernels' object
//! file, the `tapc-runtime` static library (executor, `.npy` I/O, command line) and the C
//! libraries Rust's standard library needs.
//!
//! The runtime library is found, in order: `$TAPC_RUNTIME_LIB`; the newest of
//! `libtapc_runtime.a` next to the running executable and `libtapc_runtime-*.a` in the `deps/`
//! directory of the cargo profile the executable was built in (cargo builds the runtime's
//! staticlib whenever it builds `tapc`); the same directory as recorded when `tapc` was compiled.
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

/// The newest runtime library in `dirs`: an uplifted `libtapc_runtime.a` can be older than the
/// runtime cargo last built into `deps/`, so neither name wins by itself.
fn newest_in(dirs: &[PathBuf]) -> Option<PathBuf> {
    let mut best: Option<(std::time::SystemTime, PathBuf)> = None;
    for e in dirs
        .iter()
        .filter_map(|d| std::fs::read_dir(d).ok())
        .flatten()
        .flatten()
    {
        let name = e.file_name();
        let name = name.to_string_lossy();
        let lib = name == "libtapc_runtime.a"
            || name.starts_with("libtapc_runtime-") && name.ends_with(".a");
        if lib {
            let Ok(t) = e.metadata().and_then(|m| m.modified()) else {
                continue;
            };
            if best.as_ref().is_none_or(|(bt, _)| t > *bt) {
                best = Some((t, e.path()));
            }
        }
    }
    best.map(|b| b.1)
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
    if let Some(p) = newest_in(&dirs) {
        return Ok(p);
    }
    // OUT_DIR is <target>/<profile>/build/tapc-<hash>/out.
    if let Some(out) = option_env!("OUT_DIR") {
        if let Some(profile) = Path::new(out).ancestors().nth(3) {
            if let Some(p) = newest_in(&[profile.join("deps")]) {
                return Ok(p);
            }
        }
    }
    Err("cannot find the tapc runtime library (libtapc_runtime.a); build tapc with cargo (which builds it) or set TAPC_RUNTIME_LIB to its path".into())
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
