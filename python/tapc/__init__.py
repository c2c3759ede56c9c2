"""tapc: compile Tapestry Expression Graphs (TEG) and run them on numpy arrays.

    import numpy as np, tapc
    f = tapc.compile("model.teg")            # or the TEG text itself
    y = f(x=np.ones((2, 3), np.float32))     # or f(x_array) positionally
    print(y["out"], f.inputs, f.outputs)

A program is JIT-compiled for this CPU once and cached (by text, options and host CPU); each
call releases the GIL while it runs. C-contiguous, aligned inputs are read in place (never
copied); others are copied once. Outputs are numpy arrays over the buffers the program wrote
(no copy; a strided or shared sink is copied once), or are written into arrays passed as
``out={"name": array}``.

dtypes: f32 f64 f16 i8 i16 i32 i64 u8 u16 u32 u64 bool map to the numpy dtype of the same
name; bf16 is ``ml_dtypes.bfloat16`` when ml_dtypes is installed, else numpy ``uint16``
holding the bf16 bit patterns.
"""

from __future__ import annotations

import os
import threading
from typing import Any, Dict, NamedTuple, Optional, Tuple

import numpy as np

from . import _native
from ._native import CompileError

__all__ = ["compile", "Function", "Model", "Port", "CompileError", "import_onnx", "compile_onnx"]


class _PortFields(NamedTuple):
    name: str
    #: The numpy dtype arrays of this port have.
    dtype: np.dtype
    shape: Tuple[int, ...]


class Port(_PortFields):
    """A source or sink of a compiled graph: the tuple ``(name, dtype, shape)``, with the
    dtype's TEG name as ``teg_dtype`` (``"f32"``, ``"bf16"``, ...)."""

    teg_dtype: str

    def __new__(cls, name: str, dtype: np.dtype, shape: Tuple[int, ...], teg_dtype: str) -> "Port":
        self = super().__new__(cls, name, dtype, shape)
        self.teg_dtype = teg_dtype
        return self

    def __repr__(self) -> str:
        return f"Port(name={self.name!r}, dtype={self.dtype!r}, shape={self.shape!r}, teg_dtype={self.teg_dtype!r})"


def _ports(raw) -> Tuple[Port, ...]:
    return tuple(Port(name, np_dtype, tuple(shape), teg) for name, teg, np_dtype, shape in raw)


class Function:
    """A TEG graph compiled for this machine. Call it with one array per source, by name
    (``f(x=a)``) or in order (``f(a)``); it returns a dict of numpy arrays by sink name."""

    __slots__ = ("_program", "inputs", "outputs", "_names", "_out_names")

    def __init__(self, program: "_native.Program") -> None:
        self._program = program
        #: The sources, in positional order.
        self.inputs: Tuple[Port, ...] = _ports(program.inputs)
        #: The sinks, in order.
        self.outputs: Tuple[Port, ...] = _ports(program.outputs)
        self._names = {p.name: k for k, p in enumerate(self.inputs)}
        self._out_names = {p.name: k for k, p in enumerate(self.outputs)}

    def __call__(self, *args: Any, out: Optional[Dict[str, np.ndarray]] = None, **kwargs: Any) -> Dict[str, np.ndarray]:
        if not kwargs and len(args) == len(self.inputs):
            ordered = list(args)
        elif not args and kwargs.keys() == self._names.keys():
            ordered = [kwargs[n] for n in self._names]  # dicts keep the sources' order
        else:
            ordered = self._bind(args, kwargs)
        return self._program.run(ordered, self._bind_out(out) if out else None)

    def _bind(self, args, kwargs) -> list:
        n = len(self.inputs)
        if len(args) > n:
            raise TypeError(f"graph @{self.graph} takes {n} input(s), {len(args)} given")
        ordered = list(args) + [None] * (n - len(args))
        given = [True] * len(args) + [False] * (n - len(args))
        for name, value in kwargs.items():
            k = self._names.get(name)
            if k is None:
                names = ", ".join(p.name for p in self.inputs) or "none"
                raise TypeError(f"graph @{self.graph} has no input `{name}` (its inputs: {names})")
            if given[k]:
                raise TypeError(f"input `{name}` is given twice")
            ordered[k], given[k] = value, True
        missing = [p.name for p, g in zip(self.inputs, given) if not g]
        if missing:
            raise TypeError("missing input(s): " + ", ".join(f"`{m}`" for m in missing))
        return ordered

    def _bind_out(self, out: Dict[str, np.ndarray]) -> list:
        ordered = [None] * len(self.outputs)
        for name, array in out.items():
            k = self._out_names.get(name)
            if k is None:
                names = ", ".join(p.name for p in self.outputs)
                raise TypeError(f"graph @{self.graph} has no output `{name}` (its outputs: {names})")
            ordered[k] = array
        return ordered

    @property
    def teg(self) -> str:
        """The module after the passes, as TEG text."""
        return self._program.teg

    @property
    def graph(self) -> str:
        """The compiled graph's name."""
        return self._program.graph

    @property
    def threads(self) -> int:
        """Worker threads each call runs on."""
        return self._program.threads

    def signature(self) -> str:
        """Per apply: its index space, each port's projection and derived costs
        (``tapc opt --emit signature``)."""
        return self._program.signature()

    def cost(self) -> str:
        """The cost model's report of the compiled module (``tapc opt --passes=cost --emit cost``)."""
        return self._program.cost()

    def __repr__(self) -> str:
        ins = ", ".join(f"{p.name}: {p.teg_dtype}{list(p.shape)}" for p in self.inputs)
        outs = ", ".join(f"{p.name}: {p.teg_dtype}{list(p.shape)}" for p in self.outputs)
        return f"<tapc.Function @{self.graph}({ins}) -> ({outs})>"


_cache: Dict[tuple, Function] = {}
_cache_lock = threading.Lock()


def _read(source_or_path) -> Tuple[str, bytes]:
    """The file name diagnostics use and the bytes of a path or of TEG text."""
    if isinstance(source_or_path, os.PathLike):
        path = os.fspath(source_or_path)
    elif isinstance(source_or_path, str) and "\n" not in source_or_path and (
        source_or_path.endswith(".teg") or os.path.isfile(source_or_path)
    ):
        path = source_or_path
    elif isinstance(source_or_path, (str, bytes)):
        text = source_or_path.encode() if isinstance(source_or_path, str) else source_or_path
        return "<string>", text
    else:
        raise TypeError(f"tapc.compile takes TEG text or a path, not {type(source_or_path).__name__}")
    with open(path, "rb") as f:
        return path, f.read()


def compile(
    source_or_path,
    graph: Optional[str] = None,
    passes: Optional[str] = None,
    threads: Optional[int] = None,
) -> Function:
    """Compiles a TEG file (a path, or a ``.teg`` name) or TEG text for this CPU.

    graph: the graph to compile when the text has several. passes: a pass pipeline as
    ``tapc opt --passes`` takes it (default: the standard pipeline). threads: worker threads of
    each call (default: every core). Raises CompileError (with ``.diagnostics``) when the text
    does not compile. Programs are cached by text, options and host CPU.
    """
    name, text = _read(source_or_path)
    key = (text, graph, passes, threads, _native.host_cpu())
    with _cache_lock:
        hit = _cache.get(key)
    if hit is not None:
        return hit
    f = Function(_native.compile(name, text, graph, passes, threads))
    with _cache_lock:
        return _cache.setdefault(key, f)


def _shapes(input_shapes) -> list:
    """`input_shapes` ({name: dims}) as the importer takes it."""
    if input_shapes is None:
        return []
    if not isinstance(input_shapes, dict):
        raise TypeError(f"input_shapes maps an input name to its dimensions, not {type(input_shapes).__name__}")
    return [(str(name), [int(d) for d in dims]) for name, dims in input_shapes.items()]


def import_onnx(path, input_shapes=None) -> Tuple[str, Dict[str, np.ndarray]]:
    """Translates the ONNX model at ``path`` into TEG, as ``tapc import`` does.

    Returns ``(teg, weights)``: the TEG text (one graph whose sources are the model's inputs
    and its weights) and the weights as numpy arrays by source name. ``input_shapes`` maps an
    input name to its dimensions, fixing dynamic ones (``--input-shape``). Raises CompileError
    (E0120-E0127, naming the file and, for a node, the operator and opset) when the model
    cannot be imported.
    """
    teg, weights, _inputs, _outputs = _native.import_onnx(os.fspath(path), _shapes(input_shapes))
    return teg, weights


class Model:
    """An ONNX model compiled for this machine: a Function with the model's weights bound.
    Call it with the model's inputs only, by name or in ONNX order; it returns a dict of numpy
    arrays by output name. ``function`` is the compiled graph, ``weights`` the bound arrays."""

    __slots__ = ("function", "weights", "inputs", "outputs")

    def __init__(self, function: Function, weights: Dict[str, np.ndarray], inputs, outputs) -> None:
        self.function = function
        self.weights = weights
        by_name = {p.name: p for p in function.inputs}
        #: The model's inputs (the graph's sources that are not weights), in ONNX order.
        self.inputs: Tuple[Port, ...] = tuple(by_name[n] for n in inputs)
        #: The model's outputs, in ONNX order.
        self.outputs: Tuple[Port, ...] = tuple(p for n in outputs for p in function.outputs if p.name == n)

    def __call__(self, *args: Any, out: Optional[Dict[str, np.ndarray]] = None, **kwargs: Any) -> Dict[str, np.ndarray]:
        names = [p.name for p in self.inputs]
        if len(args) > len(names):
            raise TypeError(f"the model takes {len(names)} input(s), {len(args)} given")
        bound = dict(zip(names, args))
        for name, value in kwargs.items():
            if name in self.weights:
                raise TypeError(f"`{name}` is a weight of the model, bound when it was compiled")
            if name in bound:
                raise TypeError(f"input `{name}` is given twice")
            bound[name] = value
        return self.function(out=out, **self.weights, **bound)

    @property
    def teg(self) -> str:
        """The module after the passes, as TEG text."""
        return self.function.teg

    def signature(self) -> str:
        """See Function.signature."""
        return self.function.signature()

    def cost(self) -> str:
        """See Function.cost."""
        return self.function.cost()

    def __repr__(self) -> str:
        ins = ", ".join(f"{p.name}: {p.teg_dtype}{list(p.shape)}" for p in self.inputs)
        return f"<tapc.Model @{self.function.graph}({ins}), {len(self.weights)} weights>"


def compile_onnx(path, input_shapes=None, **compile_options) -> Model:
    """Imports the ONNX model at ``path`` (see import_onnx) and compiles it (see compile; the
    keyword options are compile's: graph, passes, threads). Returns a Model, called with the
    model's inputs only."""
    teg, weights, inputs, outputs = _native.import_onnx(os.fspath(path), _shapes(input_shapes))
    return Model(compile(teg, **compile_options), weights, inputs, outputs)
