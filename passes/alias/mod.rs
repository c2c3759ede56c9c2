//! Set algebra for alias analysis: stripes, setts (nested stripes), regions
//! (per-dimension setts over a shape) and region lists, with the view maps
//! (permute, reverse, broadcast, slice, reshape) needed to project tensor
//! footprints back onto their allocations.

pub mod region;
pub mod regions;
pub mod sett;
pub mod stripe;

pub use region::{Region, RegionError, SliceDim};
pub use regions::Regions;
pub use sett::Sett;
pub use stripe::{SettError, Stripe};

pub mod analysis;
