//! Distributed execution on MPI (issue 10). [`dist`] is the plan section (placement and
//! transfers) and is always built; [`run_distributed`] executes it under `mpirun` and needs
//! the `mpi` cargo feature (rsmpi against the system's Open MPI).

pub mod dist;
#[cfg(feature = "mpi")]
mod run;

use crate::entry::Outcome;
use crate::exec::KernelFn;
use crate::plan::Plan;

/// Runs this rank's part of a distributed plan (`plan_bytes`: its encoding, hashed so that all
/// ranks can check they run the same plan).
pub fn run_distributed(
    prog: &str,
    args: &[String],
    plan: &Plan,
    kernels: &[KernelFn],
    plan_bytes: &[u8],
) -> Outcome {
    #[cfg(feature = "mpi")]
    {
        run::main(prog, args, plan, kernels, plan_bytes)
    }
    #[cfg(not(feature = "mpi"))]
    {
        let _ = (args, plan, kernels, plan_bytes);
        Outcome {
            stdout: String::new(),
            stderr: format!("{prog}: error: this program was compiled with `--mpi` but linked with a tapc runtime built without its `mpi` feature; rebuild it with TAPC_MPI_RUNTIME_LIB set (see README)\n"),
            code: 1,
        }
    }
}
