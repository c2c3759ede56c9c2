//! Native-backend integration tests in one binary: differential tests against the
//! interpreter, `tapc FILE -o OUT` end to end, compile scaling, the math functions, the
//! oracle's corner cases, values too large for i64, and the transformer block.

#[path = "../common/mod.rs"]
mod common;

mod argmax;
mod bitwise;
mod cold;
mod compile_scaling;
mod conv_pad;
mod conv_split;
mod depthwise;
mod dtype_reductions;
mod dtypes;
mod embed;
mod fast_math;
mod gather;
mod grad;
mod grad_cnn;
mod grad_random;
mod grid;
mod halo;
mod implicit_gemm;
mod in_place;
mod link;
mod lowp;
mod math;
mod matvec;
mod mean;
mod native;
mod native_cli;
mod oracle;
mod oracle_sizes;
mod scatter;
mod share;
mod softmax_edges;
mod steps;
mod train_block;
mod train_mlp;
mod train_transformer;
mod transformer;
mod unit;
mod vocab;
