"""See the graph backprop walks: draw any Tensor's computation graph with Graphviz, or print it.

    from minigrad import viz

    loss = model(x, y)
    loss.backward()                                         # before or after: both work
    viz.save(viz.draw_graph(loss), "graph.svg")            # shapes, names, a box per module call
    viz.save(viz.draw_graph(loss, show="grad"), "grad.svg")  # coloured by gradient size
    viz.print_graph(loss)                                   # a text listing, for terminals
    viz.backward_steps(loss)                                # the backward pass frame by frame (steps.py)

* ``draw_graph`` returns a ``graphviz.Digraph`` (it displays itself in Jupyter,
  as its DOT source when Graphviz's ``dot`` is missing: ``picture.py``);
* ``save`` writes .svg/.png/.pdf with Graphviz's ``dot``, or the .gv source when
  ``dot`` is not installed;
* ``print_graph`` needs neither.

The package reads only what the engine records on every Tensor (``_op``,
``_inputs``, ``_params``, ``_scope``, ``_vjp_depth``, and the ``FreedNode``
record backward leaves in ``_record``): ``graph.py`` turns that into a plain
list of nodes, ``dot.py`` draws it and ``text.py`` prints it. It is not
imported by ``import minigrad``, and it imports the graphviz package only
when drawing.
"""

from .dot import draw_graph, save
from .steps import backward_steps
from .text import print_graph

__all__ = ["backward_steps", "draw_graph", "print_graph", "save"]
