"""The notebook's pictures: self-attention maps with and without the causal mask, and the sinusoidal encoding.

    python -m demos.attention_maps [--out DIR]        (default DIR: out/attention_maps)

Draws the two figures of the NumPy notebook "Attention and the Transformer,
from scratch" (``000_480be21528dd973b.txt`` in the project's seeds):

* ``attention_maps.png`` (step 5): the attention weights of the 9-token
  sentence, every token seeing every token, and causal (no looking ahead);
* ``positional_encoding.png`` (step 7): the sinusoidal encoding of 100
  positions in 16 dimensions, fast frequencies at the top, slow at the bottom.

The numbers come from ``demos.attention_from_scratch`` (minigrad Tensors, the
notebook's seed and draw order), so the pictures are the notebook's.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from demos._common import parse_args, pyplot, save_figure
from demos.attention_from_scratch import SENTENCE, notebook


def draw_attention_maps(plt, w_full: np.ndarray, w_causal: np.ndarray, tokens, path: Path) -> Path:
    n = len(tokens)
    future = ~np.tril(np.ones((n, n), dtype=bool))
    cmap = plt.get_cmap("Blues").with_extremes(bad="0.85")  # masked (future) positions in grey
    fig, axes = plt.subplots(1, 2, figsize=(13, 5.6), layout="constrained")
    for ax, w, title in [(axes[0], w_full, "Self-attention (every token sees every token)"),
                         (axes[1], np.ma.masked_where(future, w_causal), "Causal self-attention (no looking ahead)")]:
        image = ax.imshow(w, cmap=cmap, vmin=0, vmax=1)
        for i in range(n):  # the weight in each cell, so the map can be read as a table too
            for j in range(n):
                if w[i, j] is not np.ma.masked:
                    ax.text(j, i, f"{w[i, j]:.2f}", ha="center", va="center", fontsize=7,
                            color="white" if w[i, j] > 0.55 else "black")
        ax.set_xticks(range(n), tokens, rotation=45, ha="right")
        ax.set_yticks(range(n), tokens)
        ax.set_xlabel("attends to (keys)")
        ax.set_title(title)
    axes[0].set_ylabel("token (queries)")
    fig.colorbar(image, ax=axes, shrink=0.8, label="attention weight (each row sums to 1; grey: masked)")
    return save_figure(fig, path)


def draw_positional_encoding(plt, PE: np.ndarray, path: Path) -> Path:
    fig, ax = plt.subplots(figsize=(10, 4), layout="constrained")
    image = ax.imshow(PE.T, aspect="auto", cmap="RdBu", vmin=-1, vmax=1)
    ax.set_xlabel("position in the sequence")
    ax.set_ylabel("dimension")
    ax.set_title("Sinusoidal positional encoding: fast frequencies at the top, slow ones at the bottom")
    fig.colorbar(image, ax=ax)
    return save_figure(fig, path)


def main(argv=None) -> list[Path]:
    args = parse_args(argv, "attention_maps", __doc__.splitlines()[0])
    nb = notebook()
    plt = pyplot()
    if plt is None:
        return []
    paths = [draw_attention_maps(plt, nb.sa.w_full.numpy(), nb.sa.w_causal.numpy(), SENTENCE,
                                 args.out / "attention_maps.png"),
             draw_positional_encoding(plt, nb.PE, args.out / "positional_encoding.png")]
    for path in paths:
        print(f"Saved {path}")
    return paths


if __name__ == "__main__":
    main()
