"""The observation layer: traces, their exports and pictures, and overlap metrics.

``trace`` records what ran where and when through the runtime's instrument hooks and a
backend wrapper; ``export`` writes Chrome/Perfetto JSON and Graphviz DOT, ``draw`` draws
timelines and DAGs, ``metrics`` computes the GrCUDA paper's overlap metrics. Nothing below
this layer imports it.
"""
