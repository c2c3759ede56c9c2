//! The shape lists of the native bench's generated workloads: the matmul sweep, the seeded
//! family of odd shapes, the low-precision contractions and ResNet-18's convolutions.

use super::rng::Rng;

/// The matmul shape sweep (M, K, N): powers of two 64 … 4096, primes and odd sizes,
/// tall-skinny and short-wide, matrix-vector (also at odd and prime sizes) and K-dominant.
pub const SWEEP: &[(i64, i64, i64)] = &[
    (64, 64, 64),
    (127, 127, 127),
    (256, 256, 256),
    (509, 509, 509),
    (512, 512, 512),
    (1000, 1000, 1000),
    (2048, 2048, 2048),
    (4096, 4096, 4096),
    (777, 1111, 333),
    (123, 4567, 89),
    (1, 4096, 4096),
    (4, 4096, 4096),
    (2, 4096, 4096),
    (3, 2999, 3001),
    (1, 2999, 3001),
    (4096, 4096, 1),
    (16, 2048, 2048),
    (2048, 2048, 16),
    (2048, 64, 2048),
    (2048, 1, 2048),
    (1, 1111, 3333),
    (3001, 2999, 1),
    (1, 17, 4099),
    (1031, 1, 997),
];

/// Issue 22's family of odd matmul shapes: `ODD_COUNT` triples (M, K, N) drawn uniformly from
/// 1 … 3000 by a fixed seed (`odd_M_K_N`), reported as the minimum and median ratio over them.
pub const ODD_COUNT: usize = 20;
const ODD_SEED: u64 = 0x0dd5_4a9e;

pub fn odd_shapes() -> Vec<(i64, i64, i64)> {
    let mut r = Rng(ODD_SEED);
    let mut dim = || 1 + r.below_i64(3000);
    (0..ODD_COUNT).map(|_| (dim(), dim(), dim())).collect()
}

/// Shapes of the low-precision contractions (`bf16mm_M_K_N`, `u8mm_M_K_N`): the 2048³
/// and a few others (prime, odd, short-wide, K-dominant).
pub const LOWP_SWEEP: &[(i64, i64, i64)] = &[
    (2048, 2048, 2048),
    (127, 127, 127),
    (777, 1111, 333),
    (16, 2048, 2048),
    (512, 4096, 512),
];

/// ResNet-18's conv layers at batch 1 (kernel, stride, input size, in and out channels),
/// padded with `pad` as the network does.
pub const RESNET_CONVS: &[(i64, i64, i64, i64, i64)] = &[
    (7, 2, 224, 3, 64),
    (3, 1, 56, 64, 64),
    (3, 2, 56, 64, 128),
    (1, 2, 56, 64, 128),
    (3, 1, 28, 128, 128),
    (3, 2, 28, 128, 256),
    (1, 2, 28, 128, 256),
    (3, 1, 14, 256, 256),
    (3, 2, 14, 256, 512),
    (1, 2, 14, 256, 512),
    (3, 1, 7, 512, 512),
];
