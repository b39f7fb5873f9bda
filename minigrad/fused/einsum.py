"""einsum: Einstein summation as one op, its VJP an einsum per operand."""

from __future__ import annotations

import string

import numpy as np

from ..ops import op, sample


def _einsum_terms(subscripts: str, shapes: list[tuple]) -> tuple[list[str], str]:
    """(["ij", "jk"], "ik") from "ij,jk->ik" and the operands' shapes, checked, with every label explicit.

    ``...`` becomes unused letters, one per axis it covers, right-aligned
    across operands as broadcasting aligns them, so that the VJP can sum over
    them like any label (NumPy's einsum will not sum over an ellipsis). Without
    "->" the output is NumPy's implicit one: "..." if any operand has it, then
    the labels used exactly once, in alphabetical order.
    """
    if not isinstance(subscripts, str):
        raise TypeError(f"subscripts must be a string like 'ij,jk->ik', got {type(subscripts).__name__}")
    compact = subscripts.replace(" ", "").replace("...", ".")
    lhs, arrow, rhs = compact.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(shapes):
        raise ValueError(f"subscripts {subscripts!r} name {len(terms)} operand(s), but {len(shapes)} were given")
    if not arrow:
        once = sorted(label for label in set(lhs) if lhs.count(label) == 1 and label.isalpha())
        rhs = ("." if "." in lhs else "") + "".join(once)
    for term, shape in zip(terms, shapes):
        if not all(label.isascii() and (label.isalpha() or label == ".") for label in term) or term.count(".") > 1:
            raise ValueError(f"subscripts {subscripts!r}: labels are letters, and '...' comes at most once per "
                             f"operand")
        if len(set(term)) != len(term):
            raise ValueError(f"subscripts {subscripts!r}: a label repeated within one operand (a diagonal or "
                             f"trace) is not supported")
        if len(shape) < len(term) - ("." in term) or ("." not in term and len(shape) != len(term)):
            raise ValueError(f"subscripts {subscripts!r}: term {term.replace('.', '...')!r} does not fit an "
                             f"operand of shape {shape}")
    rank = 0  # the axes "..." covers, most over the operands
    for term, shape in zip(terms, shapes):
        if "." in term:
            rank = rank if rank > len(shape) - len(term) + 1 else len(shape) - len(term) + 1
    free = [letter for letter in string.ascii_uppercase + string.ascii_lowercase if letter not in compact]
    if rank > len(free):
        raise ValueError(f"subscripts {subscripts!r}: '...' covers {rank} axes, more than the unused letters")
    ellipsis = "".join(free[:rank])
    inputs = [term.replace(".", ellipsis[rank - (len(shape) - len(term) + 1):]) for term, shape in zip(terms, shapes)]
    return inputs, rhs.replace(".", ellipsis)


@op()
class einsum:
    """Einstein summation, as ``np.einsum``: ``mg.einsum("bhqd,bhkd->bhqk", q, k)``.

    Every operand's labels (letters) are its axes; labels missing from
    the output are summed over; ``...`` stands for leading axes that broadcast.
    Each label may appear once per operand (no diagonals or traces). The VJP is
    einsum again: an operand's gradient contracts the output's gradient with
    the other operands, and is the same all along the labels only it has.
    Fused: the composite multiplies every operand out to all the labels' axes
    before summing, where NumPy's einsum contracts pairwise.
    """
    samples = [sample((3, 4), (4, 5), subscripts="ij,jk->ik"), sample((2, 3, 4), (2, 3, 4), subscripts="bti,bti->i"),
               sample((2, 3, 4), (4,), subscripts="...i,i->..."), sample((3, 4), subscripts="ij->j"),
               sample((3,), (4,), subscripts="i,j"), sample((2, 1, 4), (3, 4), (4,), subscripts="...i,...i,i->i")]

    def forward(*operands, subscripts):
        inputs, output = _einsum_terms(subscripts, [x.shape for x in operands])
        return np.asarray(np.einsum(",".join(inputs) + "->" + output, *operands))

    def vjp(g, out, *operands, subscripts):
        inputs, output = _einsum_terms(subscripts, [x.shape for x in operands])
        grads = []
        for i, x in enumerate(operands):
            if not x.requires_grad:  # a constant operand (layer norm's xhat, say): no contraction to run
                grads.append(None)
                continue
            others = inputs[:i] + inputs[i + 1:]
            known = set(output).union(*others)
            kept = "".join(label for label in inputs[i] if label in known)
            grad = einsum(g, *operands[:i], *operands[i + 1:], subscripts=",".join([output, *others]) + "->" + kept)
            if kept != inputs[i]:  # summed over labels only x has: put them back as size-1 axes
                sizes = iter(grad.shape)
                grad = grad.reshape(tuple(next(sizes) if label in kept else 1 for label in inputs[i]))
            if grad.shape != x.shape:
                # Size 1 along an axis where x is bigger: the gradient is the same all along it. (Where
                # x's axis is the size-1 one, broadcast, the engine sums the gradient back to it.)
                grad = grad.broadcast_to(np.broadcast_shapes(grad.shape, x.shape))
            grads.append(grad)
        return tuple(grads)

    def composite(*operands, subscripts):
        inputs, output = _einsum_terms(subscripts, [x.shape for x in operands])
        labels = sorted(set("".join(inputs)))  # one axis per label, in this order
        product = None
        for term, x in zip(inputs, operands):
            order = sorted(range(len(term)), key=lambda i: labels.index(term[i]))
            aligned = x.transpose(order) if order != sorted(order) else x
            aligned = aligned.reshape(tuple(x.shape[term.index(label)] if label in term else 1 for label in labels))
            product = aligned if product is None else product * aligned  # broadcasts to every label's size
        summed = tuple(i for i, label in enumerate(labels) if label not in output)
        result = product.sum(axis=summed) if summed else product
        remaining = [label for label in labels if label in output]
        order = [remaining.index(label) for label in output]
        result = result.transpose(order) if order != sorted(order) else result
        return result.broadcast_to(tuple(_label_size(label, inputs, operands) for label in output))


def _label_size(label: str, inputs: list[str], operands) -> int:
    """The size of ``label``'s axis: the largest among the operands that have it (others broadcast from 1)."""
    return max((x.shape[term.index(label)] for term, x in zip(inputs, operands) if label in term), default=1)
