//! Distributed execution on MPI (issue 10). [`dist`] is the plan section (placement and
//! transfers, and [`group`]'s reduction groups) and is always built; the rest runs it under
//! `mpirun` and needs the `mpi` cargo
//! feature (rsmpi against the system's Open MPI): `run` is one rank's run (the same steps as a
//! single process, `crate::program`, in the rank's own mode), `local` builds the rank's part
//! of the plan (`pieces`: of each buffer, only the windows the rank touches), and `comm`
//! moves the data (the send and receive kernels), `coll` the reduction groups (one
//! `MPI_Ireduce`/`MPI_Iallreduce` task per rank); `sinks` writes each rank's windows of the
//! sinks into the staged files.

#[cfg(feature = "mpi")]
mod coll;
#[cfg(feature = "mpi")]
mod comm;
pub mod dist;
pub mod group;
#[cfg(feature = "mpi")]
mod local;
#[cfg(feature = "mpi")]
mod pieces;
#[cfg(feature = "mpi")]
pub(crate) mod run;
#[cfg(feature = "mpi")]
mod sinks;
