//! Compiled programs at run time, in one binary: reliability (signals, limits, concurrent
//! runs, faults, corrupt plans), the path policy of every writer, and distributed execution
//! under `mpirun` (its per-rank memory: `mpi_memory`; its sharded outputs: `mpi_sinks`; the
//! cost model's plans moving the predicted bytes: `mpi_plans`; training over several steps,
//! data-parallel included: `mpi_train`).

#[path = "../common/mod.rs"]
mod common;

mod mpi;
mod mpi_build;
mod mpi_calibrate;
mod mpi_collectives;
mod mpi_forms;
mod mpi_gather;
mod mpi_memory;
mod mpi_plans;
mod mpi_scaling;
mod mpi_sinks;
mod mpi_train;
mod mpi_vocab;
mod paths;
mod reliability;
