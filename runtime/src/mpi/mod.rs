//! Distributed execution on MPI (issue 10). [`dist`] is the plan section (placement and
//! transfers, and [`group`]'s reduction groups) and is always built, and so are `local` (a
//! rank's part of the plan), `pieces` (of each buffer, only the windows the rank touches),
//! `sinks` (who writes which windows of the sinks) and [`peak`] (a rank's planned peak memory,
//! which the cost pass reports per node without MPI). The rest runs it under `mpirun` and needs
//! the `mpi` cargo feature (rsmpi against the system's Open MPI): `run` is one rank's run (the
//! same steps as a single process, `crate::program`, in the rank's own mode), `comm` moves the
//! data (the send and receive kernels), `coll` the reduction groups (one
//! `MPI_Ireduce`/`MPI_Iallreduce`/`MPI_Ireduce_scatter` task per rank) and `links` measures
//! the links for `tapc calibrate`; `sinks` writes each rank's windows of the sinks into the
//! staged files; `carry` keeps the state on its ranks over `--steps N`.

#[cfg(feature = "mpi")]
mod carry;
#[cfg(feature = "mpi")]
mod coll;
#[cfg(feature = "mpi")]
mod comm;
pub mod dist;
pub mod group;
pub mod links;
// Without MPI only the plan and the message bytes are used (by `peak`), not the routes.
#[cfg_attr(not(feature = "mpi"), allow(dead_code))]
mod local;
pub mod peak;
mod pieces;
#[cfg(feature = "mpi")]
pub(crate) mod run;
// Without MPI only the local plan's sink windows are used, not the staging and writing.
#[cfg_attr(not(feature = "mpi"), allow(dead_code))]
mod sinks;
