//! Stable error codes. Every code is listed in docs/teg.md and has an expected-diagnostic
//! filetest; codes are never reused for a different meaning.

use std::fmt;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Code(pub &'static str);

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}

macro_rules! codes {
    ($($name:ident = $code:literal : $what:literal;)*) => {
        $(#[doc = $what] pub const $name: Code = Code($code);)*
        /// Every code with its one-line meaning, in order.
        pub const ALL: &[(Code, &str)] = &[$(($name, $what)),*];
    };
}

codes! {
    UNEXPECTED_CHAR = "E0001": "a character that cannot start any token";
    SYNTAX = "E0002": "unexpected token";
    UNEXPECTED_EOF = "E0003": "the file ended in the middle of a construct";
    BAD_LITERAL = "E0004": "a numeric literal that does not fit its type";
    TOO_DEEP = "E0005": "an expression nested deeper than the front end's limit (256)";
    BAD_ENCODING = "E0006": "bytes that are not valid UTF-8";
    DUPLICATE = "E0010": "a name defined twice (op, graph, port, value, source, index variable)";
    UNDEFINED_VALUE = "E0011": "use of a value (%name) that is not defined before the use";
    UNDEFINED_OP = "E0012": "apply of an op (@name) that is not defined";
    UNKNOWN_DTYPE = "E0013": "a dtype that is not one of the thirteen TEG dtypes (f16, bf16, f32, f64, i8 ... u64, bool)";
    UNKNOWN_INSTR = "E0014": "an unknown graph instruction (selector or generator name)";
    ARITY = "E0015": "wrong number of operands, arguments or results";
    BAD_ATTR = "E0016": "a missing, malformed or out-of-range selector attribute";
    DTYPE_MISMATCH = "E0020": "operands whose dtypes do not agree";
    SHAPE_MISMATCH = "E0021": "a shape that does not unify with an op's port shape";
    ANNOTATION_MISMATCH = "E0022": "a written result type that differs from the inferred one";
    RANK_MISMATCH = "E0023": "a tensor of the wrong rank";
    BAD_SHAPE = "E0024": "a shape expression that is negative, non-constant or not integral";
    TOO_LARGE = "E0025": "a value whose byte size, strides or load offsets overflow i64";
    UNDEFINED_NAME = "E0030": "a kernel name that is no index variable, symbol, parameter or port";
    NON_AFFINE = "E0031": "a tensor index that is not affine in the index variables";
    OUT_OF_BOUNDS = "E0032": "an index whose range can leave its tensor's bounds";
    UNKNOWN_EXTENT = "E0033": "an index variable whose extent cannot be inferred";
    BAD_TARGET = "E0034": "an invalid assignment target in a kernel";
    MISSING_OUTPUT = "E0035": "an op output that its kernel never assigns";
    UNKNOWN_FUNCTION = "E0036": "an unknown kernel function, or one called with the wrong arguments";
    USE_BEFORE_DEF = "E0037": "a kernel temporary used before it is assigned";
    BAD_REDUCTION = "E0038": "an invalid reduction (unknown kind, bad or shadowing variables)";
    BAD_GATHER = "E0039": "an invalid gathered index (not an integer input, nested, on the left-hand side, or an unsupported form)";
    BAD_PARAM = "E0040": "a missing, unknown or duplicate op parameter at an apply";
    BAD_SCATTER_ATTR = "E0041": "a `scatter` with a missing, malformed or out-of-range `axis` or `reduce`";
    BAD_SCATTER_INDEX = "E0042": "a `scatter` whose indices are not of an integer dtype";
    BAD_SCATTER_SHAPE = "E0043": "a `scatter` whose base, indices and updates do not have matching shapes";
    BAD_SCATTER_DTYPE = "E0044": "a `scatter` whose updates' dtype differs from its base's";
    BAD_SCATTER_REDUCE = "E0045": "a `scatter` reduction its dtype does not have (`add`, `max` or `min` of bool)";
    BAD_SINK = "E0050": "two sinks with the same name";
    BAD_SEQUENCE = "E0051": "a sequence point naming something that is not a sink or apply";
    CYCLE = "E0052": "a cycle through sequence points";
    BAD_PIN = "E0053": "a pin naming something that is not a value defined above";
    BAD_GRAD_LOSS = "E0060": "a `grad` whose loss is not a rank-0 float value";
    BAD_GRAD_WRT = "E0061": "a `grad` with respect to a value that is not a float tensor";
    STATE_WITHOUT_UPDATE = "E0064": "a state that no `update` gives a next value";
    UPDATE_WITHOUT_STATE = "E0065": "an `update` naming no state of its graph";
    TWO_UPDATES = "E0066": "a state updated twice";
    UPDATE_TYPE = "E0067": "an update whose value's type differs from its state's";
    BAD_SIGNATURE = "E0070": "an invalid explicit signature in an extern op";
    NO_KERNEL = "E0071": "evaluation of an extern op that has no reference kernel";
    BAD_RANGE = "E0080": "an invalid sharded index range or placement";
    IO = "E0100": "a file that cannot be read or written";
    NOT_AVAILABLE = "E0101": "the native backend cannot compile or link the graph";
    RUNTIME = "E0102": "an error while running a graph (bad input tensor, missing source binding)";
    BAD_PASS = "E0103": "an unknown pass or a malformed pass list";
    BAD_GRAPH_CHOICE = "E0104": "no graph, or several graphs and no `--graph NAME`";
    PASS_FAILED = "E0105": "a pass failed or produced a module that does not verify (a compiler bug)";
    BAD_SHARD = "E0106": "an apply that cannot be sharded as asked";
    GRAD_UNSUPPORTED = "E0110": "a construct on the path from a `grad`'s inputs to its loss that the `grad` pass cannot differentiate (yet)";
    ONNX_READ = "E0120": "an ONNX model that cannot be read: a missing file, or a truncated or corrupt protobuf";
    ONNX_EXTERNAL = "E0121": "an ONNX tensor whose external data file is missing, outside the model's directory, or too short";
    ONNX_UNSUPPORTED_OP = "E0122": "an ONNX operator (at its domain and opset) that `tapc import` cannot lower";
    ONNX_UNSUPPORTED_FORM = "E0123": "a supported ONNX operator used with an attribute, dtype or input form the importer cannot lower";
    ONNX_SHAPE = "E0124": "an ONNX value whose shape cannot be inferred (a dynamic dimension without `--input-shape`)";
    ONNX_INPUT_SHAPE = "E0125": "a malformed `--input-shape NAME=d0,d1,...` or `--input-value NAME=FILE.npy`, one naming no model input, or a value file that does not fit the input";
    ONNX_INVALID = "E0126": "an invalid ONNX graph: an undefined value, a missing input or attribute, shapes that do not agree";
    ONNX_INTERNAL = "E0127": "an imported model whose TEG does not verify: a size TEG cannot hold (E0025), or an importer bug";
}
