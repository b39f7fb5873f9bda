"""The drawing ``draw_graph`` returns: a ``graphviz.Digraph`` that shows itself in Jupyter, dot or no dot.

A Digraph already displays itself inline in Jupyter, as SVG rendered by
Graphviz's ``dot`` program. Without ``dot`` that display would be a traceback;
a ``Picture`` shows instead the DOT source and how to render it (install
Graphviz, or paste the source into any Graphviz viewer).

This module imports graphviz, so ``dot.py`` imports it only when it draws.
"""

from __future__ import annotations

import html

import graphviz

from .dot import INSTALL_HINT

RENDER_HINT = (f"Graphviz's `dot` program was not found, so this graph is shown as its DOT source. To see the "
               f"picture, {INSTALL_HINT}, or save it with viz.save(graph, 'graph.gv') and open that in any "
               f"Graphviz viewer.")


class Picture(graphviz.Digraph):
    """A ``graphviz.Digraph`` whose notebook display falls back to its source when ``dot`` cannot render it."""

    def _repr_mimebundle_(self, include=None, exclude=None, **kwargs) -> dict:
        try:
            bundle = super()._repr_mimebundle_(include=include, exclude=exclude, **kwargs)
            if "image/svg+xml" in bundle:  # never wider than the notebook's column: scale down to fit
                bundle["image/svg+xml"] = bundle["image/svg+xml"].replace(
                    "<svg ", '<svg style="max-width:100%;height:auto" ', 1)
            return bundle
        except graphviz.ExecutableNotFound:
            reason = RENDER_HINT
        except graphviz.CalledProcessError as err:
            first = (err.stderr or b"").decode(errors="replace").strip().splitlines()
            reason = f"Graphviz's `dot` failed ({first[0] if first else f'exit {err.returncode}'}); the DOT source:"
        return {
            "text/plain": f"{reason}\n\n{self.source}",
            "text/html": f"<p>{html.escape(reason)}</p><pre>{html.escape(self.source)}</pre>",
        }
