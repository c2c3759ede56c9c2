//! The native backend: a verified graph becomes an LLVM module of kernels plus a runtime
//! [`Plan`] (the task DAG), compiled for the host CPU with inkwell (LLVM 14).
//!
//! - [`schedule`] turns the graph into buffers, strided views and tasks (one per apply or
//!   shard, plus gathers for non-strided selectors and generator kernels);
//! - [`kernel`] compiles each apply into one function over an index sub-range, [`copy`] the
//!   gathers and generators, [`scatter`] the scatters, with the TEG scalar semantics of [`ops`];
//! - the module is optimised with the new pass manager (`default<O3>`) for the host CPU and
//!   its feature string ([`target`]);
//! - [`emit_to_file`] writes LLVM IR, assembly, an object, or an executable linked with the
//!   runtime static library by the system `cc` ([`link`]); [`with_jit`] compiles in-process
//!   with MCJIT and runs the plan on the same executor (`tapc run --native`).
//!
//! All pointer typing lives in [`ptr`], so a newer (opaque-pointer) LLVM is a change there.

pub mod collective;
pub mod copy;
pub mod distribute;
pub mod epilogue;
pub mod grid;
pub mod kernel;
pub mod link;
pub mod loops;
pub mod math;
pub mod ops;
pub mod ptr;
pub mod replicate;
pub mod reuse;
pub mod scatter;
pub mod schedule;
pub mod share;
pub mod storage;
pub mod target;
pub mod view;
pub mod vmem;

use crate::diag::{codes, Diagnostic};
use crate::ir::Module;
use crate::verify::GraphFacts;
use inkwell::context::Context;
use inkwell::execution_engine::ExecutionEngine;
use inkwell::module::{Linkage, Module as LModule};
use inkwell::passes::PassBuilderOptions;
use inkwell::targets::{FileType, RelocMode};
use inkwell::types::BasicType;
use inkwell::values::{BasicMetadataValueEnum, FunctionValue};
use inkwell::OptimizationLevel;
use schedule::{KernelSpec, Schedule};
use std::collections::HashMap;
use std::path::Path;
use tapc_runtime::cli::{self, Declared};
use tapc_runtime::exec::{self, KernelFn, Report};
use tapc_runtime::output::Outputs;
use tapc_runtime::paths::shown;
use tapc_runtime::plan::Plan;
use tapc_runtime::Tensor;

/// What `tapc FILE -o OUT` writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum EmitKind {
    /// Optimised LLVM IR (text).
    Llvm,
    /// Assembly for the host CPU.
    Asm,
    /// An object file with the kernels, the embedded plan and `main`.
    Obj,
    /// An executable linked with the runtime library (the default).
    Exe,
}

/// Code generation options.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Options {
    /// Whether float `sum[k](a * b)` reductions multiply and add with one rounding.
    pub fp_contract: FpContract,
    /// Whether bf16 and u8×i8 contractions may use the CPU's dot-product instructions.
    pub dot_products: DotProducts,
}

/// `--dot-products`: whether low-precision contractions use dot-product instructions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum DotProducts {
    /// `vdpbf16ps` for bf16 and `vpdpbusd` for u8×i8 contractions when the host has
    /// AVX512_BF16 / AVX512_VNNI (docs/teg.md §12 states their tolerance).
    #[default]
    Auto,
    /// The portable path only (what a host without the instructions runs).
    Portable,
}

/// `--fp-contract`: how a float sum of products rounds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum FpContract {
    /// Separate roundings of the product and the sum, as the interpreter does (matmuls then
    /// equal the interpreter bit for bit, at up to half the FMA peak).
    Off,
    /// Fused multiply-add (one rounding), as BLAS, numpy and JAX do: within the documented
    /// float tolerance of the interpreter.
    #[default]
    On,
}

/// Which runtime an executable links: the single-process one, or the MPI one (`--mpi`: the
/// plan carries placement and transfers, see [`distribute`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Runtime {
    #[default]
    Local,
    Mpi,
}

fn backend_error(msg: impl Into<String>) -> Diagnostic {
    Diagnostic::error(codes::NOT_AVAILABLE, msg.into())
}

/// Runs `f`, turning a panic inside LLVM glue into an error (a compiler bug, never bad input).
fn guarded<T>(f: impl FnOnce() -> Result<T, Diagnostic>) -> Result<T, Diagnostic> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(p) => {
            let what = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            Err(
                backend_error(format!("internal error in the native backend: {what}"))
                    .note("this is a tapc bug; `tapc run --interp` still evaluates the graph"),
            )
        }
    }
}

fn kernel_symbol(k: usize) -> String {
    format!("tapc_k{k}")
}

/// Builds (and optimises) the module for graph `gi`; `with_main` adds the embedded plan and
/// a C `main` for executables.
#[allow(clippy::too_many_arguments)]
fn build<'ctx>(
    cx: &'ctx Context,
    m: &Module,
    gi: usize,
    facts: &GraphFacts,
    with_main: bool,
    reloc: RelocMode,
    opts: &Options,
    rt: Runtime,
) -> Result<(LModule<'ctx>, Schedule, inkwell::targets::TargetMachine), Diagnostic> {
    let host = target::host().map_err(backend_error)?;
    let g = &m.graphs[gi];
    let mut sched = schedule::build_for(m, g, facts, host.lanes, rt == Runtime::Mpi)?;
    match rt {
        // A distributed plan moves pieces of buffers between ranks: no buffer is reused there.
        Runtime::Mpi => sched.plan.dist = distribute::plan(&sched),
        Runtime::Local => {
            reuse::in_place(&mut sched);
            share::dead_buffers(&mut sched);
        }
    }
    let module = cx.create_module(&format!("teg.{}", g.name));
    let machine = host.machine(reloc).map_err(backend_error)?;
    module.set_triple(&machine.get_triple());
    module.set_data_layout(&machine.get_target_data().get_data_layout());
    let builder = cx.create_builder();
    let gen = ops::Gen {
        cx,
        m: &module,
        b: &builder,
        w: host.lanes,
        contract: opts.fp_contract == FpContract::On,
        dot: match opts.dot_products {
            DotProducts::Auto => host.dot,
            DotProducts::Portable => target::Dot::default(),
        },
        alias: None,
    };
    let mut entries = Vec::new();
    for (k, spec) in sched.kernels.iter().enumerate() {
        let name = kernel_symbol(k);
        let f = match spec {
            KernelSpec::Apply {
                inst,
                inputs,
                outputs,
                plan,
                alias,
            } => {
                let gen = ops::Gen {
                    alias: *alias,
                    ..gen
                };
                kernel::emit(&gen, host, &name, inst, inputs, outputs, plan)
            }
            KernelSpec::Gather {
                out,
                src_strides,
                maps,
                fill,
            } => copy::emit_gather(&gen, host, &name, out, src_strides, maps, *fill),
            KernelSpec::Generate { out, kind } => {
                copy::emit_generate(&gen, host, &name, out, *kind)
            }
            KernelSpec::Scatter(s) => scatter::emit_scatter(&gen, host, &name, s),
        }
        .map_err(|e| backend_error(format!("cannot compile `{}`: {e}", sched.names[k])))?;
        entries.push(f);
    }
    if with_main {
        emit_main(cx, &module, &builder, host, &sched.plan, &entries);
    }
    if let Err(e) = module.verify() {
        return Err(backend_error(format!(
            "internal error: the generated LLVM module is invalid: {}",
            e.to_string().lines().next().unwrap_or_default()
        )));
    }
    let opts = PassBuilderOptions::create();
    opts.set_loop_vectorization(true);
    opts.set_loop_slp_vectorization(true);
    opts.set_loop_unrolling(true);
    module
        .run_passes("default<O3>", &machine, opts)
        .map_err(|e| backend_error(format!("LLVM optimisation failed: {e}")))?;
    Ok((module, sched, machine))
}

/// The plan as a constant, the kernel table, and `main` calling the runtime's entry point.
fn emit_main<'ctx>(
    cx: &'ctx Context,
    module: &LModule<'ctx>,
    b: &inkwell::builder::Builder<'ctx>,
    host: &target::Host,
    plan: &Plan,
    entries: &[FunctionValue<'ctx>],
) {
    let bytes = plan.encode();
    let blob = cx.const_string(&bytes, false);
    let gplan = module.add_global(blob.get_type(), None, "tapc.plan");
    gplan.set_initializer(&blob);
    gplan.set_constant(true);
    gplan.set_linkage(Linkage::Private);
    let kty = entries.first().map(|f| f.get_type()).unwrap_or_else(|| {
        let bp = ptr::byte_ptr(cx);
        cx.i32_type().fn_type(
            &[
                ptr::ptr_to(bp.into()).into(),
                ptr::ptr_to(cx.i64_type().into()).into(),
            ],
            false,
        )
    });
    let kptr = kty.ptr_type(inkwell::AddressSpace::default());
    let table = kptr.const_array(
        &entries
            .iter()
            .map(|f| f.as_global_value().as_pointer_value())
            .collect::<Vec<_>>(),
    );
    let gtable = module.add_global(table.get_type(), None, "tapc.kernels");
    gtable.set_initializer(&table);
    gtable.set_constant(true);
    gtable.set_linkage(Linkage::Private);
    let i32t = cx.i32_type();
    let i64t = cx.i64_type();
    let bp = ptr::byte_ptr(cx);
    let argv_t = ptr::ptr_to(bp.into());
    let rt_ty = i32t.fn_type(
        &[
            i32t.into(),
            argv_t.into(),
            bp.into(),
            i64t.into(),
            ptr::ptr_to(kptr.as_basic_type_enum()).into(),
            i64t.into(),
        ],
        false,
    );
    let rt = module.add_function("tapc_rt_main", rt_ty, None);
    let main = module.add_function(
        "main",
        i32t.fn_type(&[i32t.into(), argv_t.into()], false),
        None,
    );
    host.tag(cx, main);
    let bb = cx.append_basic_block(main, "entry");
    b.position_at_end(bb);
    let argc = main.get_nth_param(0).expect("argc");
    let argv = main.get_nth_param(1).expect("argv");
    let p = ptr::cast(b, gplan.as_pointer_value(), cx.i8_type().into());
    let t = ptr::cast(b, gtable.as_pointer_value(), kptr.into());
    let args: Vec<BasicMetadataValueEnum> = vec![
        argc.into(),
        argv.into(),
        p.into(),
        i64t.const_int(bytes.len() as u64, false).into(),
        t.into(),
        i64t.const_int(entries.len() as u64, false).into(),
    ];
    let r = b
        .build_call(rt, &args, "")
        .expect("positioned")
        .try_as_basic_value()
        .basic()
        .expect("returns i32");
    b.build_return(Some(&r)).expect("positioned");
}

/// Compiles graph `gi` for runtime `rt` (`Runtime::Mpi`: a distributed plan, linked with the
/// MPI runtime library and Open MPI) and writes `kind` to `out` (via a temporary file, so a
/// failure leaves nothing behind), under the path policy of `tapc_runtime::paths`: `out` may
/// not be one of `inputs` (the same file).
#[allow(clippy::too_many_arguments)]
pub fn emit_to_file(
    m: &Module,
    gi: usize,
    facts: &GraphFacts,
    kind: EmitKind,
    out: &Path,
    opts: &Options,
    rt: Runtime,
    inputs: &[&Path],
) -> Result<(), Diagnostic> {
    guarded(|| {
        let cx = Context::create();
        let with_main = matches!(kind, EmitKind::Obj | EmitKind::Exe | EmitKind::Asm);
        let (module, _, machine) = build(&cx, m, gi, facts, with_main, RelocMode::PIC, opts, rt)?;
        let io = |e: String| Diagnostic::error(codes::IO, e);
        let cannot = |e: String| io(format!("cannot write {}: {e}", shown(out)));
        // All or nothing (tapc_runtime::output): written into a staging directory beside
        // `out`, which a failure, SIGINT or SIGTERM removes, and renamed into place at the end.
        let mut outputs = Outputs::new();
        for i in inputs {
            outputs.protect(i);
        }
        let staged = outputs.stage(out).map_err(|e| io(e.to_string()))?;
        let to_memory = |ft: FileType| {
            machine
                .write_to_memory_buffer(&module, ft)
                .map(|b| b.as_slice().to_vec())
                .map_err(|e| cannot(e.to_string()))
        };
        let write = |path: &Path, bytes: &[u8]| {
            let created = tapc_runtime::output::create_staged(path);
            (created.and_then(|mut f| std::io::Write::write_all(&mut f, bytes)))
                .map_err(|e| cannot(tapc_runtime::npy::io_message(&e)))
        };
        match kind {
            EmitKind::Llvm => write(&staged, module.print_to_string().to_bytes())?,
            EmitKind::Asm => write(&staged, &to_memory(FileType::Assembly)?)?,
            EmitKind::Obj => write(&staged, &to_memory(FileType::Object)?)?,
            EmitKind::Exe => {
                let obj = staged.with_extension("tapc.o");
                write(&obj, &to_memory(FileType::Object)?)?;
                // A signal's clean-up waits for the linker, so it cannot leave its output.
                let linked = tapc_runtime::signals::creating(|| {
                    Ok(link::link(&obj, &staged, rt).map_err(backend_error))
                });
                linked.map_err(|e| cannot(tapc_runtime::npy::io_message(&e)))??;
                let _ = std::fs::remove_file(&obj);
            }
        }
        tapc_runtime::signals::test_pause("write");
        outputs.commit().map_err(|e| io(e.to_string()))?;
        Ok(())
    })
}

/// A graph compiled in-process: its plan and the addresses of its kernels.
pub struct Program<'a> {
    pub plan: &'a Plan,
    kernels: &'a [KernelFn],
}

impl Program<'_> {
    /// The compiled kernels, indexed by the plan's `Task::kernel`.
    pub fn kernels(&self) -> &[KernelFn] {
        self.kernels
    }

    /// Runs the plan with sources bound by name (through the runtime's binding, as `tapc
    /// run` and compiled programs bind them); inputs no source is named after are ignored,
    /// as the interpreter ignores them.
    pub fn run(
        &self,
        inputs: &HashMap<String, Tensor>,
        opts: &exec::Options,
    ) -> Result<(Vec<(String, Tensor)>, Report), String> {
        let sources = Declared::of(self.plan);
        let named: Vec<(String, &Tensor)> = (inputs.iter())
            .filter(|(n, _)| sources.iter().any(|s| s.name == n.as_str()))
            .map(|(n, t)| (n.clone(), t))
            .collect();
        let ins =
            cli::bind(&self.plan.graph, &sources, &named, &[], |_| None).map_err(|e| e.message)?;
        exec::execute(self.plan, self.kernels, &ins, opts)
    }
}

/// The LLVM context and execution engine that own a [`Jit`]'s machine code. Never used after
/// the kernels' addresses are taken; only dropped (the engine, then its context).
struct Machine {
    engine: std::mem::ManuallyDrop<ExecutionEngine<'static>>,
    cx: *mut Context,
}

impl Drop for Machine {
    fn drop(&mut self) {
        // SAFETY: the engine borrows the context, so it goes first; the context came from
        // `Box::into_raw` in `jit` and is freed once, here.
        unsafe {
            std::mem::ManuallyDrop::drop(&mut self.engine);
            drop(Box::from_raw(self.cx));
        }
    }
}

// SAFETY: after `jit` returns, nothing calls into the engine or the context again: they only
// keep the machine code mapped until they are dropped, which needs no particular thread. The
// kernels are plain functions over the buffers they are given.
unsafe impl Send for Machine {}
unsafe impl Sync for Machine {}

/// A graph JIT-compiled once and kept: its plan and kernels stay valid until it is dropped,
/// so an embedder (the Python package) runs it many times without recompiling.
pub struct Jit {
    pub plan: Plan,
    kernels: Vec<KernelFn>,
    _machine: Machine,
}

impl Jit {
    /// The compiled kernels, indexed by the plan's `Task::kernel`.
    pub fn kernels(&self) -> &[KernelFn] {
        &self.kernels
    }

    /// The program, to run.
    pub fn program(&self) -> Program<'_> {
        Program {
            plan: &self.plan,
            kernels: &self.kernels,
        }
    }
}

/// JIT-compiles graph `gi` (MCJIT) into a [`Jit`] that keeps its machine code.
pub fn jit(m: &Module, gi: usize, facts: &GraphFacts, opts: &Options) -> Result<Jit, Diagnostic> {
    let cx: *mut Context = Box::into_raw(Box::new(Context::create()));
    // SAFETY: the context lives until `Machine` drops it, after the engine that borrows it.
    let cx_ref: &'static Context = unsafe { &*cx };
    let made = guarded(|| {
        let (module, sched, _) = build(
            cx_ref,
            m,
            gi,
            facts,
            false,
            RelocMode::Default,
            opts,
            Runtime::Local,
        )?;
        let engine = module
            .create_jit_execution_engine(OptimizationLevel::Aggressive)
            .map_err(|e| backend_error(format!("cannot start the LLVM JIT: {e}")))?;
        // The runtime functions kernels call are in this process, not a library.
        if let Some(f) = module.get_function(kernel::gather::GATHER_FAULT) {
            let report = tapc_runtime::fault::tapc_rt_gather_fault as *const () as usize;
            engine.add_global_mapping(&f, report);
        }
        if let Some(f) = module.get_function(scatter::SCATTER_FAULT) {
            let report = tapc_runtime::fault::tapc_rt_scatter_fault as *const () as usize;
            engine.add_global_mapping(&f, report);
        }
        Ok((engine, sched))
    });
    let (engine, sched): (ExecutionEngine<'static>, Schedule) = match made {
        Ok(v) => v,
        Err(d) => {
            // SAFETY: nothing borrows the context any more.
            drop(unsafe { Box::from_raw(cx) });
            return Err(d);
        }
    };
    let machine = Machine {
        engine: std::mem::ManuallyDrop::new(engine),
        cx,
    };
    let mut kernels: Vec<KernelFn> = Vec::new();
    for k in 0..sched.kernels.len() {
        let addr = (machine.engine.get_function_address(&kernel_symbol(k)))
            .map_err(|e| backend_error(format!("JIT lookup of kernel {k} failed: {e:?}")))?;
        // SAFETY: the symbol is a kernel compiled with exactly this signature.
        kernels.push(unsafe { std::mem::transmute::<usize, KernelFn>(addr) });
    }
    Ok(Jit {
        plan: sched.plan,
        kernels,
        _machine: machine,
    })
}

/// JIT-compiles graph `gi` (MCJIT) and calls `f` with the program; the machine code lives
/// until `f` returns.
pub fn with_jit<T>(
    m: &Module,
    gi: usize,
    facts: &GraphFacts,
    opts: &Options,
    f: impl FnOnce(&Program) -> T,
) -> Result<T, Diagnostic> {
    let j = jit(m, gi, facts, opts)?;
    Ok(f(&j.program()))
}

/// JIT-compiles (with `copts`) and runs graph `gi` once.
pub fn run_jit(
    m: &Module,
    gi: usize,
    facts: &GraphFacts,
    inputs: &HashMap<String, Tensor>,
    copts: &Options,
    opts: &exec::Options,
) -> Result<(Vec<(String, Tensor)>, Report), Diagnostic> {
    with_jit(m, gi, facts, copts, |p| p.run(inputs, opts))?
        .map_err(|e| Diagnostic::error(codes::RUNTIME, e))
}
