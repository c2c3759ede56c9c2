//! `tapc import MODEL.onnx -o MODEL.teg [--weights-dir DIR] [--input-shape NAME=d0,...]
//! [--input-value NAME=FILE.npy]`: the
//! ONNX importer ([`crate::import`]) run from the command line. The TEG file and one `.npy`
//! per weight are written all or nothing (nothing at all when the import fails), the weights
//! inside `--weights-dir` (default: the output's directory, made when missing) under their
//! sanitized names.

use super::Cx;
use crate::diag::{codes, Diagnostic};
use crate::import::{import_onnx, parse_input_shape, parse_input_value, ImportOptions};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use tapc_runtime::output::Outputs;
use tapc_runtime::paths::shown;

impl Cx {
    /// `tapc import`.
    pub(super) fn import(
        &mut self,
        model: &Path,
        output: &Path,
        weights_dir: Option<&Path>,
        input_shapes: &[String],
        input_values: &[String],
    ) -> bool {
        let name = shown(model).to_string();
        let mut opts = ImportOptions::default();
        for s in input_shapes {
            match parse_input_shape(s) {
                Ok(pair) => opts.input_shapes.push(pair),
                Err(d) => return self.fail(&name, d),
            }
        }
        for s in input_values {
            match parse_input_value(s) {
                Ok(pair) => opts.input_values.push(pair),
                Err(d) => return self.fail(&name, d),
            }
        }
        let imported = match import_onnx(model, &opts) {
            Ok(i) => i,
            Err(diags) => {
                self.report(&name, "", &diags);
                return false;
            }
        };
        let dir: PathBuf = match weights_dir {
            Some(d) => d.to_path_buf(),
            None => match output.parent() {
                Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
                _ => PathBuf::from("."),
            },
        };
        let mut teg = String::new();
        let _ = writeln!(
            teg,
            "// Weights: {}/NAME.npy. Run: tapc run {} --input-dir {} {}",
            shown(&dir),
            shown(output),
            shown(&dir),
            imported
                .inputs
                .iter()
                .map(|i| format!("--input {i}={i}.npy"))
                .collect::<Vec<_>>()
                .join(" ")
        );
        teg.push_str(&imported.teg);
        // The output's directory and the weights directory are made when missing (as
        // `--out-dir` is), and removed again if the outputs cannot be written.
        let parent = output.parent().filter(|p| !p.as_os_str().is_empty());
        let weights = (!imported.weights.is_empty()).then_some(dir.as_path());
        let made = match make_missing_dirs(parent.into_iter().chain(weights)) {
            Ok(m) => m,
            Err(e) => return self.fail(&name, Diagnostic::error(codes::IO, e.to_string())),
        };
        let mut o = Outputs::new();
        o.protect(model);
        let staged = o
            .write(output, |w| w.write_all(teg.as_bytes()))
            .and_then(|()| {
                imported.weights.iter().try_for_each(|(n, t)| {
                    o.write(&dir.join(format!("{n}.npy")), |w| {
                        tapc_runtime::npy::write_into(w, t)
                    })
                })
            });
        match staged.and_then(|()| o.commit()) {
            Ok(_) => {
                let _ = writeln!(
                    self.out.stderr,
                    "wrote {} and {} weights in {}",
                    shown(output),
                    imported.weights.len(),
                    shown(&dir)
                );
                true
            }
            Err(e) => {
                for d in made.iter().rev() {
                    let _ = std::fs::remove_dir(d);
                }
                self.fail(&name, Diagnostic::error(codes::IO, e.to_string()))
            }
        }
    }
}

/// Makes each of `dirs` that does not exist; the ones it made, in order. On an error the ones
/// made before it are removed again.
fn make_missing_dirs<'a>(
    dirs: impl Iterator<Item = &'a Path>,
) -> Result<Vec<PathBuf>, tapc_runtime::npy::NpyError> {
    let mut made = Vec::new();
    for d in dirs {
        if d.exists() || made.iter().any(|m: &PathBuf| m == d) {
            continue;
        }
        if let Err(e) = tapc_runtime::output::ensure_dir(d) {
            made.iter().rev().for_each(|m| drop(std::fs::remove_dir(m)));
            return Err(e);
        }
        made.push(d.to_path_buf());
    }
    Ok(made)
}
