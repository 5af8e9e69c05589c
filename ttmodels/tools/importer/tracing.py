"""Tracing: torch.fx on the example input, every node through its table row (``trace``)."""
from __future__ import annotations

import contextlib
import io
import os
import re

from .intermediate import (ImportError_, Layer, Traced, Unsupported, UnsupportedError, _Skip, _Val,
                           _unsupported)
from .tables import FUNCTION_OPS, METHOD_OPS, _pair, module_row
from .where import _first_line, _short_path, _user_frame


#: ops whose parameters are read by key (``weights:`` names them when a module is called again)
_WEIGHTED = ("conv2d", "conv_transpose2d", "linear", "batch_norm", "layer_norm", "group_norm", "grn")

_FRAME = re.compile(r'File "([^"]+)", line (\d+), in (\S+)')


def _source_of(node) -> str:
    """The innermost frame of the node's stack outside torch itself: the model's own line."""
    import torch
    skip = (os.path.dirname(os.path.abspath(torch.__file__)) + os.sep,
            os.path.dirname(os.path.abspath(__file__)) + os.sep)      # and the tracer's own
    frames = _FRAME.findall(node.stack_trace or "")
    for f, line, _fn in reversed(frames):
        if os.path.abspath(f).startswith(skip):
            continue
        return f"{_short_path(f)}:{line}"
    return "?"


def _stack_of(node) -> list[tuple[str, str]]:
    st = node.meta.get("nn_module_stack") or {}
    out = []
    for key, v in st.items():
        path, cls = v if isinstance(v, tuple) else (key, None)
        qual = cls if isinstance(cls, str) else (f"{cls.__module__}.{cls.__qualname__}"
                                                 if cls is not None else "?")
        out.append((path, qual))
    return out


class _Ctx:
    """What the table rows build with: layers, fusions, names."""

    def __init__(self, gm, mods):
        self.gm = gm
        self.mods = mods
        self.layers: list[Layer] = []
        self.taken: set[str] = set()
        self._renamed: dict[str, str] = {}     # an add renamed after its activation module
        self.called: set[str] = set()          # modules with weights already made a layer
        self.constants: dict[str, tuple[int, ...]] = {}   # learned scalars: key -> shape
        self._radix_split: dict[str, list] = {}  # a map split into its radix groups, once

    # -- names
    def _unique(self, name: str) -> str:
        base, k = name, 1
        while name in self.taken:
            name = f"{base}_{k}"
            k += 1
        self.taken.add(name)
        return name

    def name_for(self, node, base: str | None = None) -> str:
        if node.op == "call_module":
            return str(node.target)
        stack = _stack_of(node)
        owner = stack[-1][0] if stack else ""
        base = base or (node.target.__name__ if callable(node.target) else str(node.target))
        base = re.sub(r"[^A-Za-z0-9_]", "_", base).strip("_") or "op"
        base = {"iadd": "add", "imul": "mul", "isub": "sub", "relu_": "relu", "add_": "add",
                "mul_": "mul"}.get(base, base)
        return f"{owner}.{base}" if owner else base

    def layer(self, node, op, fields, inputs, name=None) -> _Val:
        for v in inputs:
            if v.kind not in ("tensor", "nhwc"):
                _unsupported(f"{op} of a {v.kind} value")
        nhwc = bool(inputs) and inputs[0].kind == "nhwc"
        stack = _stack_of(node)
        if node.op == "call_module" and stack:
            stack = stack[:-1]
        cls = type(self.mods[node.target]).__name__ if node.op == "call_module" else (
            f"{getattr(node.target, '__name__', node.target)}()")
        if node.op == "call_module" and op in _WEIGHTED:
            if str(node.target) in self.called:
                # the module called again (shared weights): a layer of its own reading the
                # first call's keys, never keys the importer would invent (conv_1.weight)
                fields = {**fields, "weights": str(node.target)}
            self.called.add(str(node.target))
        lay = Layer(self._unique(name or self.name_for(node)), op, fields,
                    [v.tensor for v in inputs], stack, [cls], _source_of(node), node.name, node,
                    in_channels=(inputs[0].shape[-1 if nhwc else 1] if inputs and
                                 inputs[0].shape and len(inputs[0].shape) > 1 else None))
        self.layers.append(lay)
        return _Val("nhwc" if nhwc else "tensor", lay.name, layer=lay, shape=_shape(node))

    def _sole_user(self, v: _Val) -> bool:
        return v.layer is not None and v.layer.fx_node is not None and \
            len([u for u in v.layer.fx_node.users if not _reads_shape(u)]) == 1 and \
            v.layer.name == v.tensor

    def _absorb(self, v: _Val, node, part: str) -> _Val:
        v.layer.parts.append(part)
        v.layer.fx, v.layer.fx_node = node.name, node
        return _Val(v.kind, v.tensor, layer=v.layer, shape=_shape(node))

    def batch_norm(self, node, prefix: str, eps: float, what: str, x):
        """An eval BatchNorm whose parameters are ``prefix.weight`` etc.: folded into the conv
        before it, else a batch_norm layer (named ``prefix``, the module's path)."""
        eps = float(eps)
        if x.kind == "tensor" and self._sole_user(x) and x.layer.op == "conv2d" and \
                x.layer.fields["bn"] is None and x.layer.fields["act"] is None:
            x.layer.fields["bn"] = {"name": prefix, "eps": eps}
            return self._absorb(x, node, f"+ {what} {prefix}")
        return self.layer(node, "batch_norm", {"weights": None, "eps": eps, "act": None}, [x],
                          name=None if node.op == "call_module" else prefix)

    def activation(self, node, act, x):
        from ...ops import activations
        d = activations.get(act)
        if x.kind in ("tensor", "nhwc") and self._sole_user(x) and \
                x.layer.fields.get("act", 0) is None:
            op = x.layer.op
            fuses = {"conv2d": d.fuses_conv, "conv_transpose2d": d.fuses_conv,
                     "linear": d.fuses_matmul, "batch_norm": True,
                     "add": d.fuses_binary, "multiply": d.fuses_binary,
                     "subtract": d.fuses_binary}.get(op, False)
            if fuses:
                x.layer.fields["act"] = act
                what = type(self.mods[node.target]).__name__ if node.op == "call_module" else \
                    f"{getattr(node.target, '__name__', node.target)}()"
                if node.op == "call_module" and op in ("add", "multiply", "subtract"):
                    # a parameter-free layer takes the activation module's name (torchvision's
                    # BasicBlock: the add + relu is "relu")
                    # the add's own name stays taken: a later add reusing it would be
                    # rewritten to this one's new name (HRNet's fuse_act called twice)
                    old = x.layer.name
                    x.layer.name = self._unique(str(node.target))
                    v = self._absorb(x, node, f"+ {what} {node.target}")
                    v.tensor = x.layer.name
                    self._renamed[old] = x.layer.name
                    return v
                return self._absorb(x, node, f"+ {what}" + (
                    f" {node.target}" if node.op == "call_module" else ""))
        # standalone: the table's parameters become the op's fields
        d, params = activations.split(act)
        return self.layer(node, d.name, {p.name: v for p, v in zip(d.params, params)}, [x])

    def channel_slice(self, node, x, idx):
        """``x[:, a:b]`` (and ``x[:, a:b, :, :]``, ``x[:, :, ...]``): a slice of the channels."""
        idx = idx if isinstance(idx, tuple) else (idx,)
        s = tuple(x.shape or ())
        full = slice(None, None, None)
        rest = [i for i in idx[2:] if i is not Ellipsis]
        if x.kind != "tensor" or len(s) != 4 or len(idx) < 2 or idx[0] != full or \
                not isinstance(idx[1], slice) or any(i != full for i in rest):
            _unsupported(f"indexing a {list(s)} tensor with {idx!r} (only channel slices "
                         "x[:, a:b])")
        lo, hi, step = idx[1].indices(s[1])
        if step != 1 or hi <= lo:
            _unsupported(f"a channel slice {idx[1]!r} with a step or empty")
        if (lo, hi) == (0, s[1]):
            return x
        return self.layer(node, "slice", {"channels": [lo, hi]}, [x],
                          name=self.name_for(node, "slice"))

    def binary(self, node, op, a, b, name=None):
        if not isinstance(a, _Val) or not isinstance(b, _Val) or a.kind != "tensor" or \
                b.kind != "tensor":
            _unsupported(f"{op} with a Python number or constant (only tensor {op} tensor)")
        sa, sb = tuple(a.shape or ()), tuple(b.shape or ())
        if sa != sb:
            vec = lambda s: len(s) == 4 and s[2:] == (1, 1)         # noqa: E731
            if not ((vec(sa) or vec(sb)) and sa[:2] == sb[:2]):
                _unsupported(f"{op} of shapes {list(sa)} and {list(sb)} (equal shapes, or a "
                             "map and a per-image [N, C, 1, 1] vector)")
            if op == "subtract" and vec(sa):
                _unsupported("subtract of a map from a vector")
        return self.layer(node, op, {"act": None}, [a, b], name=name)

    def pool(self, node, op, kernel, stride, padding, extra, x):
        kernel = _pair(kernel)
        stride = kernel if stride is None or stride == [] else _pair(stride)
        padding = _pair(padding)
        return self.layer(node, op, {"kernel": kernel, "stride": stride, "padding": padding,
                                     **extra}, [x])

    def adaptive(self, node, size, x):
        h, w = (size, size) if not isinstance(size, (tuple, list)) else tuple(size)
        ih, iw = (x.shape or (0, 0, 0, 0))[2:4]
        h, w = h or ih, w or iw
        if (h, w) == (1, 1):
            return self.layer(node, "global_avg_pool", {}, [x])
        if (h, w) == (ih, iw):
            return x                          # e.g. VGG's 7x7 pool on a 7x7 map
        if h > ih or w > iw:
            return self._upward_adaptive(node, (h, w), x)
        return self.layer(node, "adaptive_avg_pool2d", {"size": _pair((h, w))}, [x])

    def _upward_adaptive(self, node, size, x):
        """An adaptive pool up to a larger map (each bin averages one or two inputs per axis):
        a nearest upsample and an average pool not counting its padding, when they give
        torch's bins exactly (``adaptive.as_up_pool``); else refused saying so."""
        from .adaptive import as_up_pool
        (h, w), (n, c, ih, iw) = size, tuple(x.shape)
        uh, uw = as_up_pool(ih, h), as_up_pool(iw, w)
        if uh is None or uw is None:
            _unsupported(f"adaptive_avg_pool2d to {h}x{w} from {ih}x{iw}: an upward adaptive pool "
                         "(output larger than its input) whose bins no nearest upsample + "
                         "average pool reproduces (the spec's adaptive_avg_pool2d only pools "
                         "down)")
        base = self.name_for(node)
        y = x
        if (uh.scale, uw.scale) != (1, 1):
            y = self.layer(node, "upsample", {"scale": _pair((uh.scale, uw.scale)),
                                              "mode": "nearest", "align_corners": False}, [x],
                           name=f"{base}_upsample")
            y.layer.fx, y.shape = "", (n, c, ih * uh.scale, iw * uw.scale)
            y.layer.parts.append(f"{ih}x{iw} -> {h}x{w}, part 1: nearest upsample")
        v = self.layer(node, "avg_pool2d", {
            "kernel": _pair((uh.kernel, uw.kernel)), "stride": _pair((uh.stride, uw.stride)),
            "padding": _pair((uh.padding, uw.padding)), "ceil_mode": False,
            "count_include_pad": False}, [y])
        v.layer.parts.append(f"{ih}x{iw} -> {h}x{w}: nearest upsample + average pool (its bins "
                             "exactly)")
        return v

    def flatten(self, node, start, end, x):
        s = tuple(x.shape or ())
        if x.kind == "shuffle" and (start, end) == (1, 2):
            return self.view(node, x)
        if len(s) == 4 and start == 1 and end in (-1, 3) and s[2:] == (1, 1):
            return _Val("tensor", x.tensor, layer=x.layer, shape=(s[0], s[1]))
        if len(s) == 2 and start == 1:
            return x
        if len(s) == 4 and start == 1 and end in (-1, 3):
            # a map: the spec's flatten keeps torch's C, H, W order (VGG's classifier)
            return self.layer(node, "flatten", {}, [x])
        _unsupported(f"flatten of a {list(s)} tensor from dim {start} to {end} (only "
                     "flatten(1) of an NCHW map)")

    def upsample(self, node, size, scale, mode, align_corners, x):
        if mode not in ("nearest", "bilinear"):
            _unsupported(f"upsampling mode {mode!r}")
        s = x.shape or (0, 0, 1, 1)
        if size is not None:
            # the size the trace saw (``size=x.shape[-2:]`` is a shape value, not numbers)
            out = _shape(node)
            hw = tuple(out[2:4]) if out is not None and len(out) == 4 else (
                (size, size) if isinstance(size, int) else tuple(size))
            if hw[0] % s[2] or hw[1] % s[3]:
                _unsupported(f"upsampling {s[2]}x{s[3]} to {hw[0]}x{hw[1]} (not an integer factor)")
            scale = (hw[0] // s[2], hw[1] // s[3])
        sc = scale if isinstance(scale, (tuple, list)) else (scale, scale)
        if any(float(v) != int(v) or int(v) < 1 for v in sc):
            _unsupported(f"scale factor {scale} (integers only)")
        fields = {"scale": _pair([int(v) for v in sc]), "mode": mode,
                  "align_corners": bool(align_corners) if mode == "bilinear" else False}
        return self.layer(node, "upsample", fields, [x])

    # -- the channel shuffle (torchvision's channel_shuffle): x.view(N, g, C // g, H, W),
    # transpose(1, 2) (contiguous() passes it through), view back to [N, C, H, W]: one
    # channel_shuffle layer. The steps between are "shuffle" values, const = (the 4D input,
    # transposed yet, g); anything else reading one is reported as reading a shuffle value.
    def view(self, node, x):
        out, s = _shape(node), tuple(x.shape or ())
        if x.kind == "param":             # timm's gamma.reshape(1, -1, 1, 1): still the key
            return _Val("param", const=x.const, shape=out)
        if x.kind == "shuffle":
            src, swapped, g = x.const
            if swapped and out == tuple(src.shape):
                v = self.layer(node, "channel_shuffle", {"groups": g}, [src],
                               name=self.name_for(node, "channel_shuffle"))
                v.layer.parts = ["view() transpose() view(): a channel shuffle"]
                return v
            _unsupported(f"a view / reshape of a {list(s)} tensor to {list(out or ())} inside a "
                         "channel shuffle (only back to [N, C, H, W] after transpose(1, 2))")
        if x.kind == "tensor" and len(s) == 4 and out is not None and len(out) == 5 and \
                out[0] == s[0] and out[3:] == s[2:] and out[1] * out[2] == s[1]:
            return _Val("shuffle", shape=out, const=(x, False, out[1]))
        if x.kind == "tensor" and out == s:
            return x
        if x.kind == "tensor" and len(s) == 4 and s[2:] == (1, 1) and out is not None and \
                len(out) == 4 and out[0] == s[0] and out[1] * out[2] * out[3] == s[1]:
            # split attention's attention vector viewed as [N, cardinality, radix, C/(c r)]
            return _Val("radix", shape=out, const=(x, out[2], False, out[1]))
        if x.kind == "radix_attn" and out is not None:
            return _Val("radix_attn", items=x.items, shape=out)   # reshape / view: the same
        if x.kind == "tensor" and len(s) == 4 and out is not None and len(out) == 2 and \
                out == (s[0], s[1] * s[2] * s[3]):
            return self.flatten(node, 1, -1, x)          # x.view(x.size(0), -1)
        if x.kind == "tensor" and out is not None and (
                (s in ((s[0], s[1]), (s[0], s[1], 1, 1)) and len(s) in (2, 4) and
                 out == (s[0], 1, s[1])) or
                (len(s) == 3 and s[1] == 1 and out in ((s[0], s[2]), (s[0], s[2], 1, 1)))):
            # ECA: a per-image vector viewed [N, 1, C] for its Conv1d, and back: the same
            # vector (a ``linear`` with ``band`` reads and writes it)
            return _Val("tensor", x.tensor, layer=x.layer, shape=out)
        _unsupported(f"a view / reshape of a {list(s)} tensor to {list(out or ())} (only the "
                     "channel shuffle's: [N, C, H, W] to [N, g, C/g, H, W], transpose(1, 2), back)")

    def transpose(self, node, x, d0, d1):
        if x.kind == "radix" and not x.const[2] and sorted((d0 % 4, d1 % 4)) == [1, 2]:
            return _Val("radix", shape=_shape(node), const=(*x.const[:2], True, x.const[3]))
        if x.kind == "shuffle" and not x.const[1] and sorted((d0 % 5, d1 % 5)) == [1, 2]:
            return _Val("shuffle", shape=_shape(node), const=(x.const[0], True, x.const[2]))
        _unsupported(f"transpose of dims {d0}, {d1} of a {list(x.shape or ())} tensor (only dims "
                     "1, 2 of the channel shuffle's [N, g, C/g, H, W] view)")

    # -- channels-last (ConvNeXt's Permute([0, 2, 3, 1]) ... Permute([0, 3, 1, 2])): our tensors
    # are channels-last already, so a permute is no layer; between the two the value is "nhwc"
    # (the same tensor, torch's NHWC shape), which LayerNorm, Linear and activations read
    def permute(self, node, x, dims):
        dims = tuple(int(d) % max(len(dims), 1) for d in dims)
        if x.kind == "shuffle" and dims == (0, 2, 1, 3, 4):
            return self.transpose(node, x, 1, 2)
        if x.kind == "tensor" and len(x.shape or ()) == 4 and dims == (0, 2, 3, 1):
            return _Val("nhwc", x.tensor, layer=x.layer, shape=_shape(node))
        if x.kind == "nhwc" and dims == (0, 3, 1, 2):
            return _Val("tensor", x.tensor, layer=x.layer, shape=_shape(node))
        _unsupported(f"permute {list(dims)} of a {list(x.shape or ())} "
                     f"{'channels-last ' if x.kind == 'nhwc' else ''}tensor (only NCHW to "
                     "channels-last [0, 2, 3, 1] and back [0, 3, 1, 2])")

    def layer_norm(self, node, shape, weight, bias, eps, x, channels_first):
        s = tuple(x.shape or ())
        c = s[1] if channels_first or len(s) == 2 else s[-1]
        ok = (x.kind == "nhwc" or len(s) == 2) if not channels_first else \
            (x.kind == "tensor" and len(s) == 4)
        if not ok or tuple(shape) != (c,):
            _unsupported(f"a layer norm over {list(shape)} of a {list(s)} "
                         f"{'channels-last ' if x.kind == 'nhwc' else ''}tensor (only over the "
                         "channels)")
        if (weight is None) != (bias is None):
            _unsupported("a layer norm with a weight but no bias")
        return self.layer(node, "layer_norm", {"eps": float(eps), "affine": weight is not None},
                          [x])

    # -- split attention (ResNeSt's SplitAttn + RadixSoftmax, cardinality 1, radix 2): the map
    # viewed [N, r, C/r, H, W] is a "shuffle" value (as the channel shuffle's first view), its
    # sum over dim 1 the adds of its r channel groups; the attention vector viewed [N, 1, r,
    # C/r] and transposed is a "radix" value, whose softmax over the radix is, at r = 2,
    # sigmoid(z0 - z1) and sigmoid(z1 - z0): a "radix_attn" value of r per-group vectors; the
    # map times it is r multiplies ("radix_prod"), summed over dim 1 by adds.
    def _groups(self, node, x5):
        if x5.kind == "radix_maps":              # SKNet's torch.stack(paths, dim=1)
            return x5.items
        src, swapped, r = x5.const
        if swapped:
            _unsupported("a split attention over a transposed view")
        if src.tensor not in self._radix_split:
            c = src.shape[1]
            items = self.split(node, [c // r] * r, src).items
            self.producer_of(items[0]).fx = ""      # no module value is this split
            self._radix_split[src.tensor] = items
        return self._radix_split[src.tensor]

    def producer_of(self, v: _Val) -> Layer:
        return next(l for l in reversed(self.layers) if l.outputs and v.tensor in l.outputs)

    def radix_sum(self, node, x, dim):
        if dim not in (1, -4) or x.kind not in ("shuffle", "radix_prod", "radix_maps"):
            _unsupported(f"sum over dim {dim} of a {list(x.shape or [])} view (only a split "
                         "attention's sum over its radix, dim 1)")
        items = self._groups(node, x) if x.kind == "shuffle" else x.items
        acc = items[0]
        for i, item in enumerate(items[1:], 1):
            if acc.layer is not None:
                acc.layer.fx = ""                # a partial sum: no module value
            acc = self.binary(node, "add", acc, item, name=self.name_for(node, "add"))
        return acc

    def radix_softmax(self, node, x, dim):
        if x.kind == "shuffle":                  # SKNet: the logits viewed [N, r, C/r, 1, 1]
            z, vec, r = x.const
            ok = not vec and tuple(z.shape[2:]) == (1, 1) and dim % 5 == 1
            swapped, card = True, 1
        else:
            z, r, swapped, card = x.const
            ok = dim % 4 == 1
        if not (swapped and ok) or r < 2:
            _unsupported(f"softmax over dim {dim} of a {list(x.shape or [])} tensor (only a split "
                         "attention's softmax across its radix, ResNeSt / SKNet)")
        c = z.shape[1]
        if r > 2 or card > 1:
            return self._radix_softmax_reshaped(node, z, r, card)
        z0, z1 = self.split(node, [c // 2, c // 2], z).items
        self.producer_of(z0).fx = ""
        out = []
        for a, b in ((z0, z1), (z1, z0)):        # softmax of two: sigmoid of the difference
            v = self.layer(node, "subtract", {"act": "sigmoid"}, [a, b],
                           name=self.name_for(node, "softmax"))
            v.layer.fx, v.shape = "", a.shape
            v.layer.parts = ["softmax() over a radix of 2: sigmoid(z_i - z_j)"]
            out.append(v)
        return _Val("radix_attn", items=out, shape=_shape(node))

    def _radix_softmax_reshaped(self, node, z, r, card=1):
        """A radix of 3 or more, or a cardinality above 1 (torch: the logits, in (group,
        radix, channel) order, viewed [N, card, r, C'] and transposed to [N, r, card, C']):
        reshaped to [N, r, C', 1] (cardinality 1) or to [N, card, r, C'] and permuted to
        [N, r, card, C'], the spec's softmax over the channels of each pixel (across the radix),
        reshaped back to [N, C, 1, 1] in torch's (radix, group, channel) order and split into
        the r per-radix vectors."""
        n, c = z.shape[0], z.shape[1]
        cp = c // (r * card)
        what = f"softmax() over a radix of {r}" + (f", cardinality {card}" if card > 1 else "")
        made = []
        if card == 1:
            t = self.layer(node, "reshape", {"shape": [r, cp, 1]}, [z],
                           name=self.name_for(node, "softmax_in"))
            t.shape = (n, r, cp, 1)
            made.append(t)
        else:
            t = self.layer(node, "reshape", {"shape": [card, r, cp]}, [z],
                           name=self.name_for(node, "softmax_in"))
            t.shape = (n, card, r, cp)
            made.append(t)
            t = self.layer(node, "permute", {"dims": [0, 2, 1, 3]}, [t],
                           name=self.name_for(node, "softmax_radix_first"))
            t.shape = (n, r, card, cp)
            made.append(t)
        t = self.layer(node, "softmax", {}, [t], name=self.name_for(node, "softmax"))
        t.shape = made[-1].shape
        made.append(t)
        t = self.layer(node, "reshape", {"shape": [c, 1, 1]}, [t],
                       name=self.name_for(node, "softmax_out"))
        t.shape = (n, c, 1, 1)
        made.append(t)
        for v in made:                           # no module value is any of them
            v.layer.fx = ""
            v.layer.parts = [f"{what}: to the radix as channels, softmax over them, back"]
        items = self.split(node, [c // r] * r, t).items
        self.producer_of(items[0]).fx = ""
        return _Val("radix_attn", items=items, shape=_shape(node))

    def radix_multiply(self, node, x5, attn):
        if len(attn.items) != (len(x5.items) if x5.kind == "radix_maps" else x5.const[2]):
            _unsupported("a split attention whose radix differs from its map's view")
        prods = []
        for g, a in zip(self._groups(node, x5), attn.items):
            v = self.binary(node, "multiply", g, a, name=self.name_for(node, "mul"))
            v.layer.fx, v.shape = "", g.shape
            prods.append(v)
        return _Val("radix_prod", items=prods, shape=_shape(node))

    def scalar_param(self, node, op, x, p):
        """``x * s`` / ``x + b`` / ``x - b`` with a learned one-value parameter (hgnetv2's
        LearnableAffineBlock): a binary layer reading a spec constant loaded from that key."""
        if x.kind != "tensor" or len(x.shape or ()) != 4:
            _unsupported(f"{op} of a {x.kind} {list(x.shape or ())} value by the scalar "
                         f"parameter {p.const} (only of an NCHW map)")
        key = str(p.const)
        if key in self.constants:
            _unsupported(f"the parameter {key} read twice")
        self.constants[key] = tuple(int(v) for v in (p.shape or (1,))) or (1,)
        self.taken.add(key)
        return self.layer(node, op, {"act": None}, [x, _Val("tensor", key)])

    def layer_scale(self, node, p, x):
        """``param * x`` with a per-channel parameter: [C, 1, 1] on NCHW, [C] on channels-last."""
        s, ps = tuple(x.shape or ()), tuple(p.shape or ())
        try:                              # the key's own shape says the spec's param_shape
            key_shape = tuple(self.gm.get_parameter(str(p.const)).shape)
        except AttributeError:
            key_shape = ps
        if x.kind == "tensor" and len(s) == 4 and ps in ((s[1], 1, 1), (1, s[1], 1, 1)) and \
                key_shape in ((s[1], 1, 1), (s[1],)):
            shape = "chw" if key_shape == (s[1], 1, 1) else "vector"
        elif x.kind == "nhwc" and ps == (s[-1],):
            shape = "vector"
        else:
            _unsupported(f"multiply of a {list(s)} tensor by a {list(ps)} parameter (only a "
                         "per-channel scale: [C, 1, 1], or [C] channels-last)")
        if p.const in self.taken:
            _unsupported(f"the parameter {p.const} read twice")
        return self.layer(node, "layer_scale", {"param_shape": shape}, [x], name=p.const)

    def split(self, node, counts, x):
        v = self.layer(node, "split", {"channels": {f"c{i}": c for i, c in enumerate(counts)}},
                       [x])
        lay = v.layer
        lay.outputs = [f"{lay.name}.c{i}" for i in range(len(counts))]
        c = [s for s in (x.shape or ())]
        items = []
        for i, t in enumerate(lay.outputs):
            items.append(_Val("tensor", t, layer=None, shape=(c[0], counts[i], c[2], c[3])))
        return _Val("tuple", items=items)


def _reads_shape(node) -> bool:
    """A node that reads only a tensor's shape (``x.ndim``, ``x.size()``, ``x.shape``)."""
    return (node.op == "call_function" and getattr(node.target, "__name__", "") == "getattr") \
        or (node.op == "call_method" and node.target in ("size", "dim"))


def _get_attr(cx, node):
    """A parameter the forward reads itself (ConvNeXt's layer_scale): a layer_scale's weights
    when a multiply takes it, unsupported anywhere else."""
    return _Val("param", const=str(node.target), shape=_shape(node))


def _shape(node):
    tm = node.meta.get("tensor_meta")
    return tuple(int(s) for s in tm.shape) if tm is not None and hasattr(tm, "shape") else None


def _is_bad(v) -> bool:
    return isinstance(v, _Val) and (v.kind == "bad" or (v.kind == "tuple" and any(
        _is_bad(x) for x in v.items)))


def _kind(node, mods) -> str:
    if node.op == "call_module":
        return f"module {type(mods[node.target]).__name__}"
    if node.op == "call_function":
        return f"function {getattr(node.target, '__name__', node.target)}"
    if node.op == "call_method":
        return f"method Tensor.{node.target}"
    return node.op


def trace(module, example_input, *, partial: bool = False) -> Traced:
    """The module's fx graph on ``example_input`` (NCHW), turned into spec layers.

    Unsupported nodes are collected (all of them); with ``partial`` the layers stop at the first
    one, whose input becomes the output."""
    import torch
    import torch.fx as fx
    from torch.fx.passes.shape_prop import ShapeProp

    class Tracer(fx.Tracer):
        def __init__(self):
            super().__init__()
            self.record_stack_traces = True

        def is_leaf_module(self, m, qualname):
            return module_row(m) is not None and not list(m.children()) or \
                super().is_leaf_module(m, qualname)

    was_training = module.training
    module.eval()                        # traced as in inference; the user's flag is restored
    try:
        try:
            tracer = Tracer()
            graph = tracer.trace(module)
        except Exception as e:           # noqa: BLE001 (Python control flow on a traced value)
            # trace again with the example input's values: branches on shapes (smp's input
            # check, Linknet's decoder) are taken as they are for this input, as torch.export
            # specialises them, while the graph keeps its modules for the table rows
            first = e
            try:
                tracer = _concrete_tracer(Tracer, example_input)()
                with torch.no_grad():
                    graph = tracer.trace(module)
                _drop_dead(graph)        # what only fed a branch's condition
            except Exception as e2:      # noqa: BLE001
                raise ImportError_(_trace_failure(module, first, e2)) from None
        gm = fx.GraphModule(tracer.root, graph)
        try:
            # ShapeProp prints the failing node's traceback itself before it raises: the
            # user sees one line (below), never a traceback
            with torch.no_grad(), contextlib.redirect_stderr(io.StringIO()):
                ShapeProp(gm).propagate(example_input)
        except Exception as e:           # noqa: BLE001
            extra = [n.target for n in graph.nodes if n.op == "placeholder"][1:]
            why = _shape_prop_failure(module, e)
            if extra:
                why += (f"; forward's argument(s) {', '.join(map(str, extra))} are traced as "
                        "inputs the example leaves at their defaults (one image input only)")
            raise ImportError_(why) from None
    finally:
        module.train(was_training)
    mods = dict(gm.named_modules())
    cx = _Ctx(gm, mods)
    env: dict[str, _Val] = {}
    dry_env: dict[str, _Val] = {}      # what poisoned nodes would be (to judge their users)
    bad: list[Unsupported] = []
    input_name, outputs, out_fx, out_names = None, [], [], []
    stop = None

    def val(a):
        if isinstance(a, fx.Node):
            return env[a.name]
        if isinstance(a, (list, tuple)):
            vs = [val(x) for x in a]
            if any(isinstance(v, _Val) for v in vs):
                return _Val("tuple", items=vs)
            return type(a)(vs)
        return a

    for node in gm.graph.nodes:
        if stop is not None and node.op != "output":
            env[node.name] = _Val("bad")
            continue
        if node.op == "placeholder":
            if input_name is not None:
                bad.append(Unsupported("a second input", node.name, "?",
                                       "one image input only", node.name))
                env[node.name] = _Val("bad")
                continue
            input_name = "input"
            env[node.name] = _Val("tensor", input_name, shape=_shape(node))
            continue
        if node.op == "output":
            res = node.args[0]
            # a dict (torchvision's segmentation models) or a tuple: named outputs
            if isinstance(res, dict):
                named = [(str(k), r) for k, r in res.items()]
            elif isinstance(res, (list, tuple)):
                named = [(f"out{i}", r) for i, r in enumerate(res)]
            else:
                named = [(None, res)]
            for key, r in named:
                v = val(r) if isinstance(r, fx.Node) else None
                if isinstance(v, _Val) and v.kind == "tensor":
                    outputs.append(v.tensor)
                    out_fx.append(r.name)
                    out_names.append(key)
                elif stop is None and isinstance(r, fx.Node) and not _is_bad(v):
                    bad.append(Unsupported("output", key or "(output)", _source_of(node),
                                           f"an output that is a {getattr(v, 'kind', 'value')}, "
                                           "not a map", node.name))
                elif stop is None and r is None:
                    bad.append(Unsupported("output", key or "(output)", _source_of(node),
                                           "an output that is None (forward returns no map)",
                                           node.name))
                elif stop is None and r is not None and not isinstance(r, fx.Node):
                    # a nested list / dict or a Python value: never dropped in silence
                    bad.append(Unsupported("output", key or "(output)", _source_of(node),
                                           f"an output that is a {_what(r)} (only a "
                                           "map, or one dict / tuple of maps)", node.name))
            continue
        kind = _kind(node, mods)
        if node.op == "call_module":
            found = module_row(mods[node.target])
            row = found[1] if found is not None else None
        elif node.op == "call_function":
            row = FUNCTION_OPS.get(getattr(node.target, "__name__", ""))
        elif node.op == "call_method":
            row = METHOD_OPS.get(node.target)
        elif node.op == "get_attr":
            row = _get_attr
        else:
            row = None
        args = [val(a) for a in node.args]
        kwargs = {k: val(v) for k, v in node.kwargs.items()}
        poisoned = any(_is_bad(a) for a in list(args) + list(kwargs.values()))
        try:
            if row is None:
                _unsupported("no spec op for it yet")
            if poisoned:
                # downstream of an unsupported node: only what this node itself lacks is said,
                # by its row on stand-in inputs in a throwaway context
                dry = _Ctx(gm, mods)

                def stand(a):
                    if isinstance(a, fx.Node):
                        if not _is_bad(env[a.name]):
                            return env[a.name]
                        return dry_env.get(a.name) or _Val("tensor", "?", shape=_shape(a))
                    if isinstance(a, (list, tuple)):
                        vs = [stand(x) for x in a]
                        return _Val("tuple", items=vs) if any(isinstance(v, _Val) for v in vs) \
                            else type(a)(vs)
                    return a
                try:
                    dargs = [stand(a) for a in node.args]
                    dkw = {k: stand(v) for k, v in node.kwargs.items()}
                    if node.op == "call_module":
                        r = row(dry, node, mods[node.target], *dargs, **dkw)
                    else:
                        r = row(dry, node, *dargs, **dkw)
                    if isinstance(r, _Val):
                        dry_env[node.name] = r
                except _Skip:
                    raise
                except Exception:          # noqa: BLE001 (stand-ins can upset a row: no verdict)
                    pass
                env[node.name] = _Val("bad")
                continue
            if node.op == "call_module":
                v = row(cx, node, mods[node.target], *args, **kwargs)
            else:
                v = row(cx, node, *args, **kwargs)
        except _Skip as e:
            stack = _stack_of(node)
            where = str(node.target) if node.op == "call_module" else (
                stack[-1][0] if stack else "(top level)")
            u = Unsupported(kind, where, _source_of(node), str(e), node.name)
            bad.append(u)
            env[node.name] = _Val("bad")
            if partial:
                stop = u
                ins = [a for a in node.all_input_nodes if env.get(a.name) is not None
                       and env[a.name].kind == "tensor"]
                if not ins:
                    raise UnsupportedError([u]) from None
                outputs, out_fx = [env[ins[0].name].tensor], [ins[0].name]
                out_names = []
            continue
        env[node.name] = v if isinstance(v, _Val) else _Val("const", const=v)

    unused = _unused_prefixes(module, cx.layers, cx.constants)
    # tensor renames (an add named after its activation module) in later layers' inputs
    ren = cx._renamed
    if ren:
        for lay in cx.layers:
            lay.inputs = [ren.get(t, t) for t in lay.inputs]
        outputs = [ren.get(t, t) for t in outputs]
    # one spec output per tensor (a module returning (y, y) computes y once); an output
    # name is an alias of its layer, so the graph input cannot be one
    seen: dict[str, int] = {}
    for i, t in enumerate(outputs):
        seen.setdefault(t, i)
    keep = sorted(seen.values())
    outputs, out_fx, out_names = ([lst[i] for i in keep] for lst in (outputs, out_fx,
                                                                     out_names or [None] * len(outputs)))
    taken = {lay.name for lay in cx.layers}
    names = tuple(out_names) if any(out_names) and (len(outputs) > 1 or out_names[0]) and \
        input_name not in outputs and not any(
            n in taken and n != t for n, t in zip(out_names, outputs)) else ()
    return Traced(cx.layers, input_name or "input", tuple(example_input.shape), outputs, out_fx,
                  bad, f"{type(module).__module__}.{type(module).__qualname__}", unused, stop, gm,
                  names, dict(cx.constants))


def _drop_dead(graph) -> None:
    """Remove the nodes nothing reads (a condition's ``x.sum() > t``), last first; never an
    in-place op (its effect is on its input) nor a module call (it may hold state)."""
    for node in reversed(list(graph.nodes)):
        if node.users or node.op not in ("call_function", "call_method"):
            continue
        name = getattr(node.target, "__name__", str(node.target))
        if name.endswith("_") or name.startswith("i"):     # relu_, add_, iadd, imul, ...
            continue
        graph.erase_node(node)


def _trace_failure(module, e, e2) -> str:
    """One line: why the module cannot be traced, at the source line that stopped it."""
    cls = f"{type(module).__module__}.{type(module).__qualname__}"
    msg = f"torch.fx cannot trace {cls}: {type(e).__name__}: {_first_line(e)}{_user_frame(e)}"
    if e2 is not None:
        msg += (f"; traced with the example input's values it stops at {type(e2).__name__}: "
                f"{_first_line(e2)}{_user_frame(e2)}")
    return msg


def _shape_prop_failure(module, e) -> str:
    """ShapeProp's "ShapeProp error for: node=... with meta={...}" (the node's whole stack in
    it) told as the error it wraps, at the first frame of the node's stack (the forward's line):
    e.g. an optional second forward argument traced as an input that the example leaves None."""
    cause = e.__cause__ if e.__cause__ is not None and str(e).startswith("ShapeProp error") \
        else None
    if cause is None:
        return _trace_failure(module, e, None)
    cls = f"{type(module).__module__}.{type(module).__qualname__}"
    m = _FRAME.search(str(e))            # the node's stack: its first frame is the forward's
    at = f" (at {_short_path(m.group(1))}:{m.group(2)})" if m else _user_frame(cause)
    return f"torch.fx cannot trace {cls}: {type(cause).__name__}: {_first_line(cause)}{at}"


def _concrete_tracer(base, example_input):
    """A tracer class whose proxies carry their value on ``example_input``: ``bool()``, ``len``,
    iteration, ``x.shape``, ``x.ndim``, ``x.size()`` and ``x.dim()`` give the example's values, so
    Python control flow on them is taken as it goes for this input (the graph is specialised to
    it, as a spec is to its input size)."""
    import torch
    import torch.fx as fx
    from torch.fx.node import map_aggregate

    def real(a):
        return map_aggregate(a, lambda v: v._value if isinstance(v, _Proxy) else v)

    class _Proxy(fx.Proxy):
        def __getattr__(self, k):
            v = self.__dict__.get("_value")
            if k in ("shape", "ndim", "dtype", "device", "is_cuda") and \
                    isinstance(v, torch.Tensor):
                return getattr(v, k)
            return super().__getattr__(k)

        def __bool__(self):
            return bool(self._value)

        def __len__(self):
            return len(self._value)

        def __iter__(self):
            return iter([self[i] for i in range(len(self._value))])

        def __index__(self):
            return int(self._value)

    orig = {k: torch.nn.Module.__dict__[k] for k in ("__getattr__", "__call__")}

    class _Unpatched:
        """The tracer patches Module.__call__ and __getattr__ while it traces (parameters read
        as proxies): the example's values are computed with torch's own."""
        def __enter__(self):
            self.saved = {k: torch.nn.Module.__dict__[k] for k in orig}
            for k, v in orig.items():
                setattr(torch.nn.Module, k, v)

        def __exit__(self, *exc):
            for k, v in self.saved.items():
                setattr(torch.nn.Module, k, v)

    class Concrete(base):
        def proxy(self, node):
            return _Proxy(node, self)

        def create_proxy(self, kind, target, args, kwargs, name=None, type_expr=None,
                         proxy_factory_fn=None):
            if kind == "call_method" and target in ("size", "dim"):
                a, kw = real(args), real(kwargs)
                return getattr(a[0], target)(*a[1:], **kw)
            if kind == "placeholder":
                value = example_input
            elif kind == "get_attr":
                value = self.root
                with _Unpatched():
                    for part in str(target).split("."):
                        value = getattr(value, part)
            else:
                a, kw = real(args), real(kwargs)
                if kind == "call_module":
                    with _Unpatched():
                        value = self.root.get_submodule(target)(*a, **kw)
                elif kind == "call_function":
                    value = target(*a, **kw)
                elif kind == "call_method":
                    value = getattr(a[0], target)(*a[1:], **kw)
                else:
                    value = None
            p = super().create_proxy(kind, target, args, kwargs, name, type_expr,
                                     proxy_factory_fn)
            if isinstance(p, _Proxy):
                p._value = value
            return p
    return Concrete


def _what(r) -> str:
    """A Python value's kind, as the user wrote it (fx keeps dicts / lists as immutable_*)."""
    for base in (dict, list, tuple):
        if isinstance(r, base):
            return base.__name__
    return type(r).__name__


def _unused_prefixes(module, layers: list[Layer], constants=()) -> tuple[str, ...]:
    """Key prefixes of the modules holding parameters that no layer reads (GoogLeNet's aux
    heads, everything after a --partial stop): the highest such module of each subtree."""
    used = {k.rpartition(".")[0] for k in constants}     # learned scalars' owners
    for lay in layers:
        if lay.op in ("conv2d", "conv_transpose2d", "linear", "batch_norm", "layer_norm",
                      "group_norm", "grn", "layer_scale"):
            used.add(lay.name if lay.op != "batch_norm" or not lay.fields.get("weights")
                     else lay.fields["weights"])
        if lay.op == "layer_scale":           # a parameter of the module itself (CNBlock's)
            used.add(lay.name.rpartition(".")[0])
        if lay.fields.get("bn"):
            used.add(lay.fields["bn"]["name"])
    holders = [p for p, m in module.named_modules() if p and
               (any(True for _ in m.parameters(recurse=False)) or
                any(True for _ in m.buffers(recurse=False)))]
    unused = [p for p in holders if p not in used]
    if not unused:
        return ()
    out = set()
    for p in unused:
        parts = p.split(".")
        best = p
        for k in range(1, len(parts)):
            anc = ".".join(parts[:k])
            if not any(h == anc or h.startswith(anc + ".") for h in holders if h in used):
                best = anc
                break
        out.add(best + ".")
    return tuple(sorted(out))
