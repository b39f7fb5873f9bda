"""Exercise 11: the ring all-reduce, the communication of data-parallel training.

    python -m demos.exercises check 11

N workers each hold a gradient vector (a 1-D array, all the same size); after
the all-reduce each must hold the sum of all N, every worker the very same
bits. The workers sit on a ring, and data moves only by
``received = send(src, dst, array)``: worker src hands a copy of ``array`` to
worker dst = (src + 1) % N, the next on the ring, and the network counts the
bytes. The check runs it for N = 1 to 7 workers, on sizes that N divides and
sizes it does not (smaller than N, too), in float32 and float64, and holds
the result against the sum and each worker's traffic against the ring's:
2 (N - 1) chunks of about size / N, 2 (N - 1) x size bytes in all.
Read the lesson demos/data_parallel_lesson.py, section 2.
"""

import numpy as np  # noqa: F401  (for your code)


def ring_all_reduce(buffers: list, send) -> None:
    """In place: every ``buffers[i]`` ends as the elementwise sum of all of them.

    Cut each buffer into N chunks, np.array_split(buffer, N): views, so writing a chunk writes the buffer.
    Reduce-scatter, N - 1 steps: at step s every worker i sends its chunk (i - s) mod N to worker i + 1,
        which adds what it receives into its own chunk of that index. Now worker i holds the final
        chunk (i + 1) mod N.
    All-gather, N - 1 steps: at step s every worker i sends its chunk (i + 1 - s) mod N to worker i + 1,
        which overwrites its own chunk of that index with it (chunk[...] = received).
    Let every worker send before any adds what it received: they all send at once.
    """
    raise NotImplementedError("exercise 11: ring_all_reduce")
