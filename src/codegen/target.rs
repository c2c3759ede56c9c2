//! The host target: triple, CPU name and feature string, the vector width kernels use, and
//! target machines for optimisation, object emission and the JIT.
//!
//! LLVM 14 may not know a recent CPU by name (it calls Zen 5 "generic"), but its feature
//! string still lists AVX-512, so both are passed everywhere: to the target machine and as
//! `target-cpu`/`target-features` attributes on every function (which is what MCJIT, whose
//! C API takes no CPU, compiles for).

use inkwell::attributes::{Attribute, AttributeLoc};
use inkwell::context::Context;
use inkwell::targets::{
    CodeModel, InitializationConfig, RelocMode, Target, TargetMachine, TargetTriple,
};
use inkwell::values::FunctionValue;
use inkwell::OptimizationLevel;
use std::sync::OnceLock;

/// What kernels are compiled for.
#[derive(Clone, Debug)]
pub struct Host {
    pub triple: String,
    pub cpu: String,
    pub features: String,
    /// Lanes of the vectors kernels compute with (16 with AVX-512, 8 with AVX, else 4).
    pub lanes: u32,
    pub avx512: bool,
    /// The dot-product instructions the host has (used only with 16-lane vectors).
    pub dot: Dot,
}

/// Dot-product instructions of the host.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Dot {
    /// AVX512_BF16: `vdpbf16ps` (pairs of bf16 products summed into f32 lanes).
    pub bf16: bool,
    /// AVX512_VNNI: `vpdpbusd` (quads of u8×i8 products summed into i32 lanes).
    pub vnni: bool,
}

static HOST: OnceLock<Result<Host, String>> = OnceLock::new();

/// Initialises LLVM's native target once and describes the host.
pub fn host() -> Result<&'static Host, String> {
    HOST.get_or_init(|| {
        Target::initialize_native(&InitializationConfig::default())
            .map_err(|e| format!("LLVM cannot target this machine: {e}"))?;
        let triple = TargetMachine::get_default_triple()
            .as_str()
            .to_string_lossy()
            .into_owned();
        let cpu = TargetMachine::get_host_cpu_name().to_string();
        let features = TargetMachine::get_host_cpu_features().to_string();
        let has = |f: &str| features.split(',').any(|x| x == format!("+{f}"));
        let avx512 = has("avx512f");
        let dot = Dot {
            bf16: avx512 && has("avx512bf16"),
            vnni: avx512 && has("avx512vnni"),
        };
        let lanes = if avx512 {
            16
        } else if has("avx") {
            8
        } else {
            4
        };
        Ok(Host {
            triple,
            cpu,
            features,
            lanes,
            avx512,
            dot,
        })
    })
    .as_ref()
    .map_err(Clone::clone)
}

impl Host {
    /// A target machine for this host.
    pub fn machine(&self, reloc: RelocMode) -> Result<TargetMachine, String> {
        let triple = TargetTriple::create(&self.triple);
        let target = Target::from_triple(&triple).map_err(|e| e.to_string())?;
        target
            .create_target_machine(
                &triple,
                &self.cpu,
                &self.features,
                OptimizationLevel::Aggressive,
                reloc,
                CodeModel::Default,
            )
            .ok_or_else(|| format!("LLVM cannot create a target machine for {}", self.triple))
    }

    /// Tags `f` with the host CPU and features (and, with AVX-512, asks for 512-bit vectors,
    /// which LLVM's tuning for some CPUs would otherwise split in two).
    pub fn tag(&self, cx: &Context, f: FunctionValue<'_>) {
        let s = |k: &str, v: &str| cx.create_string_attribute(k, v);
        f.add_attribute(AttributeLoc::Function, s("target-cpu", &self.cpu));
        f.add_attribute(AttributeLoc::Function, s("target-features", &self.features));
        if self.avx512 {
            f.add_attribute(AttributeLoc::Function, s("prefer-vector-width", "512"));
            f.add_attribute(AttributeLoc::Function, s("min-legal-vector-width", "512"));
        }
        let nounwind = Attribute::get_named_enum_kind_id("nounwind");
        f.add_attribute(
            AttributeLoc::Function,
            cx.create_enum_attribute(nounwind, 0),
        );
    }
}
