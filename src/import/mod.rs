//! Model importers: other formats translated into ordinary TEG text plus the weights it reads
//! as sources. Today: ONNX ([`onnx`], `tapc import MODEL.onnx`; docs/import.md).

pub mod onnx;

pub use onnx::{import_onnx, parse_input_shape, parse_input_value, ImportOptions, Imported};
