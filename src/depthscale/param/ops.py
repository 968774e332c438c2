"""The torch ops :mod:`depthscale.param.dataflow` tells apart, by what they do to the values
they are given: add two tensors, contract with a matrix, look up rows, normalise, multiply
elementwise, mask attention scores, make probabilities, join, or keep the values up to layout
(a view, a transpose, a split into parts), so that a constant multiplied in before passes
through them."""

from __future__ import annotations

import operator

import torch
import torch.nn.functional as F

__all__ = ["ADDITIONS", "CATS", "DIVS", "GAINS", "LOOKUPS", "MASKS", "MATMULS", "MHA",
           "NORM_OPS", "PROBS", "SAME", "SOFTMAX", "SPLITS"]

#: the torch functions and operators that add two tensors (a residual addition's candidates)
ADDITIONS = {torch.add, torch.Tensor.add, torch.Tensor.add_, torch.Tensor.__add__,
             torch.Tensor.__iadd__, torch.Tensor.__radd__, operator.add, operator.iadd}
MATMULS = {F.linear, torch.matmul, torch.Tensor.matmul, torch.Tensor.__matmul__,
           torch.Tensor.__rmatmul__, torch.mm, torch.Tensor.mm, torch.bmm, torch.Tensor.bmm,
           torch.addmm, torch.Tensor.addmm, torch.baddbmm, torch.Tensor.baddbmm, torch.einsum}
LOOKUPS = {F.embedding, torch.Tensor.__getitem__, torch.index_select,
           torch.Tensor.index_select, torch.take, torch.Tensor.take}
NORM_OPS = {F.layer_norm, F.group_norm, F.batch_norm, F.instance_norm, torch.layer_norm,
            *((F.rms_norm,) if hasattr(F, "rms_norm") else ())}
GAINS = {torch.mul, torch.Tensor.mul, torch.Tensor.mul_, torch.Tensor.__mul__,
         torch.Tensor.__rmul__, torch.Tensor.__imul__, operator.mul, torch.div,
         torch.Tensor.div, torch.Tensor.__truediv__, torch.Tensor.div_}
DIVS = {torch.div, torch.Tensor.div, torch.Tensor.__truediv__, torch.Tensor.div_}
#: ops that add a mask or a bias to attention scores: the scores keep their scale
MASKS = ADDITIONS | {torch.where, torch.Tensor.masked_fill, torch.Tensor.masked_fill_,
                     torch.sub, torch.Tensor.sub, torch.Tensor.__sub__}
SOFTMAX = {F.softmax, torch.softmax, torch.Tensor.softmax}
#: ops whose output is a probability (a router's scores become gates through them)
PROBS = SOFTMAX | {torch.sigmoid, torch.Tensor.sigmoid, F.sigmoid}
CATS = {torch.cat, torch.concat, torch.stack}
#: ops that split a tensor into parts that keep its values (a fused q, k, v projection's
#: output cut into q, k and v)
SPLITS = {torch.Tensor.split, torch.split, torch.Tensor.chunk, torch.chunk,
          torch.Tensor.unbind, torch.unbind, torch.Tensor.tensor_split, torch.tensor_split,
          torch.Tensor.split_with_sizes, torch.Tensor.unsafe_split}
#: ops that keep a tensor's values (up to layout), so a constant scale passes through them
SAME = {torch.Tensor.view, torch.Tensor.reshape, torch.reshape, torch.Tensor.transpose,
        torch.transpose, torch.Tensor.permute, torch.permute, torch.Tensor.contiguous,
        torch.Tensor.to, torch.Tensor.float, torch.Tensor.type_as, F.dropout,
        torch.Tensor.flatten, torch.flatten, torch.Tensor.unsqueeze, torch.Tensor.squeeze,
        torch.Tensor.expand, torch.Tensor.clone, torch.Tensor.__getitem__,
        torch.Tensor.view_as, torch.Tensor.reshape_as, torch.Tensor.unflatten,
        torch.unflatten, torch.Tensor.movedim, torch.movedim, torch.Tensor.swapaxes,
        torch.swapaxes, torch.Tensor.narrow, torch.narrow, torch.Tensor.expand_as,
        torch.Tensor.squeeze_, torch.Tensor.unsqueeze_, *SPLITS}
MHA = F.multi_head_attention_forward
