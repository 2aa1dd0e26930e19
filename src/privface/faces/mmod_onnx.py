"""dlib's CNN face detector (`mmod_human_face_detector.dat`, max-margin object detection: King,
"Max-Margin Object Detection", arXiv:1502.00046) converted to ONNX for the browser.

Only the convolutional network goes into the graph (input: the normalised tiled image pyramid,
N×3×H×W float32, any H and W; output: the detection score map N×1×h×w). The parts around it, which
the browser does itself (web/src/face/mmod.ts), are described by `metadata`: the mean RGB the
input subtracts, the pyramid's paddings, the detection window, the non-max-suppression overlap
test and the affine map from score-map to input-tensor coordinates.

Network (dlib/tools/python/src/cnn_face_detector.cpp)::

    downsampler = relu<affine<con5d<32, relu<affine<con5d<32, relu<affine<con5d<16, SUBNET>>>>>>>>>
    rcon5       = relu<affine<con5<45, SUBNET>>>
    net         = loss_mmod<con<1,9,9,1,1, rcon5<rcon5<rcon5<downsampler<input_rgb_image_pyramid<pyramid_down<6>>>>>>>>

The file stores batch-norm layers (`bn_con2`); dlib loads them into `affine` layers with
gamma' = gamma/sqrt(running_var + eps), beta' = beta − gamma'·running_mean, as done here.
The file is parsed here (dlib's serialization format, see `dlib_onnx`); the .onnx is generated
locally into the cache directory and never shipped.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from ..errors import ModelError
from .dlib_onnx import _L, OPSET, _con, _Layer, _Node, _read_details, _Reader, _sha256, cache_dir, write_atomically
from .models import model_path

CONVERTER_VERSION = 1


def _net() -> _Node:
    x = _L("input")
    for n in (16, 32, 32):
        x = _L("relu", _L("affine", _L("con", x, num_filters=n, nr=5, nc=5, stride=2)))
    for _ in range(3):
        x = _L("relu", _L("affine", _con(45, 5, 1, x)))
    return _L("loss", _con(1, 9, 1, x))


def _details(r: _Reader, node: _Node) -> _Layer:
    if node.kind == "affine":
        ver = r.string()
        if ver != "bn_con2":
            r.fail(f"expected a bn_con2 layer, found {ver!r}")
        params = r.tensor().ravel()
        gshape, bshape = r.alias(), r.alias()
        r.tensor(), r.tensor()  # means, invstds (training only)
        running_means, running_vars = r.tensor().ravel(), r.tensor().ravel()
        r.uint(), r.uint()  # num_updates, running_stats_window_size
        for _ in range(4):
            r.float()
        eps = np.float32(r.float())
        k = int(np.prod(gshape))
        if gshape != bshape or params.size != 2 * k or running_means.size != k or running_vars.size != k:
            r.fail("malformed bn_con2 layer")
        gamma = params[:k] / np.sqrt(running_vars + eps)  # float32, as dlib computes it
        beta = params[k:] - gamma * running_means
        return _Layer("affine", dict(gamma=gamma.reshape(1, k, 1, 1).astype(np.float32),
                                     beta=beta.reshape(1, k, 1, 1).astype(np.float32)))
    if node.kind == "input":
        ver = r.string()
        if ver not in ("input_rgb_image_pyramid", "input_rgb_image_pyramid2"):
            r.fail(f"unexpected input layer {ver!r}")
        avg = [r.float() for _ in range(3)]
        pads = (r.uint(), r.uint()) if ver == "input_rgb_image_pyramid2" else (10, 11)
        return _Layer("input", dict(avg_rgb=avg, padding=pads[0], outer_padding=pads[1]))
    return _read_details(r, node)


def _parse(r: _Reader, node: _Node, out: list[_Layer]) -> None:
    sub = node.sub
    if sub is None:  # pragma: no cover - the structure above always nests down to the input
        raise AssertionError(node.kind)
    if node.kind == "loss":
        r.version(1)
        if r.string() != "loss_mmod_":
            r.fail("not an MMOD network")
        opts_version = r.int()
        if opts_version != 1:
            r.fail(f"unsupported mmod_options version {opts_version}")
        width, height = r.uint(), r.uint()
        r.float(), r.float(), r.float()  # loss per false alarm / missed target, truth match IoU
        nms = (r.float(), r.float())
        r.float(), r.float()  # overlaps_ignore
        out.append(_Layer("loss", dict(window=(width, height), nms=nms)))
        _parse(r, sub, out)
        return
    if sub.kind == "input":
        ver = r.version(2, 3)
        out.append(_details(r, sub))
        out.append(_details(r, node))
        r.bool(), r.bool(), r.bool()
        r.tensor(), r.tensor(), r.tensor()
        if ver == 3:
            r.uint()
        return
    ver = r.version(1, 2)
    _parse(r, sub, out)
    out.append(_details(r, node))
    r.bool(), r.bool(), r.bool()
    r.tensor(), r.tensor()
    if ver == 2:
        r.tensor()


def read_dat(dat_path: str | os.PathLike) -> tuple[list[_Layer], dict]:
    """The layers (input first) and the metadata of the MMOD face detector file."""
    r = _Reader(Path(dat_path).read_bytes())
    parsed: list[_Layer] = []
    _parse(r, _net(), parsed)
    if r.pos != len(r.data):
        r.fail(f"{len(r.data) - r.pos} trailing bytes after the network")
    loss, layers = parsed[0], parsed[1:]
    inp = layers[0].params
    # con_::map_output_to_input, composed from the top layer down: p_in = p·stride − pad + k/2
    scale, offset = 1, 0
    for layer in reversed(layers):
        if layer.kind == "con":
            s, pad, k = layer.params["stride"][0], layer.params["pads"][0], layer.params["w"].shape[2]
            scale, offset = scale * s, offset * s - pad + k // 2
    meta = dict(avg_rgb=inp["avg_rgb"], padding=inp["padding"], outer_padding=inp["outer_padding"],
                window=list(loss.params["window"]), nms=list(loss.params["nms"]), map=[scale, offset])
    return layers, meta


def build_model(layers: list[_Layer]):
    try:
        import onnx
        from onnx import TensorProto, helper, numpy_helper
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ModelError("converting dlib's MMOD detector to ONNX needs the `onnx` package") from e
    nodes, inits = [], []
    counter = iter(range(1_000_000))

    def const(array, prefix):
        n = f"{prefix}_{next(counter)}"
        inits.append(numpy_helper.from_array(np.ascontiguousarray(array), n))
        return n

    def op(op_type, inputs, prefix, **attrs):
        out = f"{prefix}_{next(counter)}"
        nodes.append(helper.make_node(op_type, list(inputs), [out], name=out, **attrs))
        return out

    x = "x"
    for layer in layers[1:]:
        p = layer.params
        if layer.kind == "con":
            (sy, sx), (py, px) = p["stride"], p["pads"]
            ins = [x, const(p["w"], "conv_w")] + ([const(p["b"], "conv_b")] if p["b"] is not None else [])
            x = op("Conv", ins, "conv", kernel_shape=list(p["w"].shape[2:]), strides=[sy, sx],
                   pads=[py, px, py, px], dilations=[1, 1], group=1)
        elif layer.kind == "affine":
            x = op("Add", [op("Mul", [x, const(p["gamma"], "gamma")], "scaled"), const(p["beta"], "beta")], "affine")
        elif layer.kind == "relu":
            x = op("Relu", [x], "relu")
        else:  # pragma: no cover
            raise AssertionError(layer.kind)
    nodes.append(helper.make_node("Identity", [x], ["scores"], name="scores"))
    graph = helper.make_graph(nodes, "mmod_human_face_detector",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, "H", "W"])],
                              [helper.make_tensor_value_info("scores", TensorProto.FLOAT, ["N", 1, "h", "w"])],
                              initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="privface.faces.mmod_onnx", producer_version=str(CONVERTER_VERSION))
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def cached_model_paths(dat_path: str | os.PathLike | None = None) -> tuple[Path, Path]:
    """(.onnx, .json metadata) converted once into the cache directory, named by the .dat's sha256."""
    dat = Path(dat_path) if dat_path is not None else model_path("detector_cnn")
    stem = cache_dir() / f"dlib_mmod_{_sha256(dat)}_c{CONVERTER_VERSION}"
    onnx_path, meta_path = stem.with_suffix(".onnx"), stem.with_suffix(".json")
    if onnx_path.is_file() and meta_path.is_file():
        return onnx_path, meta_path
    import onnx

    layers, meta = read_dat(dat)
    write_atomically(onnx_path, lambda p: onnx.save(build_model(layers), p))
    write_atomically(meta_path, lambda p: Path(p).write_text(json.dumps(meta)))
    return onnx_path, meta_path
