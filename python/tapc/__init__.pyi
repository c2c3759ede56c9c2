"""Type stubs of the tapc package (see docs/python.md)."""

import os
from typing import Any, Dict, List, NamedTuple, Optional, Tuple, Union

import numpy as np

__all__ = ["compile", "Function", "Model", "Port", "CompileError", "import_onnx", "compile_onnx"]

class CompileError(Exception):
    """A TEG text did not compile.

    ``diagnostics``: one dict per diagnostic with ``severity``, ``code`` (``"E0011"``),
    ``message``, ``file``, ``notes`` and ``labels`` (each with ``style``, ``message``,
    ``line_start``, ``col_start``, ``line_end``, ``col_end`` (1-based) and ``byte_start``,
    ``byte_end``). ``str(err)`` is the rendered diagnostics, as ``tapc`` prints them.
    """

    diagnostics: List[Dict[str, Any]]

class Port(NamedTuple):
    """A source or sink of a compiled graph: ``(name, dtype, shape)``."""

    name: str
    dtype: np.dtype
    """The numpy dtype of its arrays (bf16: ml_dtypes.bfloat16 if installed, else uint16)."""
    shape: Tuple[int, ...]
    @property
    def teg_dtype(self) -> str:
        """The TEG dtype name: f32 f64 f16 bf16 i8 i16 i32 i64 u8 u16 u32 u64 bool."""

class Function:
    """A TEG graph compiled for this machine (from :func:`compile`)."""

    inputs: Tuple[Port, ...]
    """The sources, in positional order."""
    outputs: Tuple[Port, ...]
    """The sinks, in order."""
    def __call__(
        self, *args: np.ndarray, out: Optional[Dict[str, np.ndarray]] = None, **kwargs: np.ndarray
    ) -> Dict[str, np.ndarray]:
        """Runs the graph on one array per source (by name or in order); returns the sinks by
        name. Arrays must have the source's dtype and shape exactly (TypeError / ValueError
        otherwise); C-contiguous aligned ones are read in place, others copied once. Outputs are
        arrays over the program's own buffers (no copy) unless a sink is a strided or shared view
        (copied once). ``out``
        maps sink names to C-contiguous writeable arrays to write those sinks into. The GIL is
        released while the program runs."""
    @property
    def teg(self) -> str:
        """The module after the passes, as TEG text."""
    @property
    def graph(self) -> str:
        """The compiled graph's name."""
    @property
    def threads(self) -> int:
        """Worker threads each call runs on."""
    def signature(self) -> str:
        """Per apply: its index space, port projections and derived costs."""
    def cost(self) -> str:
        """The cost model's report of the compiled module."""

def compile(
    source_or_path: Union[str, bytes, os.PathLike],
    graph: Optional[str] = None,
    passes: Optional[str] = None,
    threads: Optional[int] = None,
) -> Function:
    """Compiles a TEG file or TEG text for this CPU (cached by text, options and host CPU).

    graph: the graph to compile when there are several; passes: a pipeline as
    ``tapc opt --passes`` takes it (default: the standard pipeline); threads: worker threads
    (default: every core). Raises :class:`CompileError`."""

def import_onnx(
    path: Union[str, os.PathLike], input_shapes: Optional[Dict[str, List[int]]] = None
) -> Tuple[str, Dict[str, np.ndarray]]:
    """Translates an ONNX model into TEG (as ``tapc import``): ``(teg, weights by source
    name)``. ``input_shapes`` fixes dynamic dimensions. Raises :class:`CompileError`."""

class Model:
    """An ONNX model compiled with its weights bound; call it with the model's inputs only."""

    function: Function
    weights: Dict[str, np.ndarray]
    inputs: Tuple[Port, ...]
    outputs: Tuple[Port, ...]
    def __call__(
        self, *args: np.ndarray, out: Optional[Dict[str, np.ndarray]] = None, **kwargs: np.ndarray
    ) -> Dict[str, np.ndarray]: ...
    @property
    def teg(self) -> str: ...
    def signature(self) -> str: ...
    def cost(self) -> str: ...

def compile_onnx(
    path: Union[str, os.PathLike],
    input_shapes: Optional[Dict[str, List[int]]] = None,
    graph: Optional[str] = None,
    passes: Optional[str] = None,
    threads: Optional[int] = None,
) -> Model:
    """Imports an ONNX model and compiles it (see :func:`import_onnx`, :func:`compile`)."""
