"""The recorder layer: repeated stretches of launches frozen into graphs and replayed.

Entry points (``entry``: ``asyncgpu.graph``, ``asyncgpu.record``), the recording itself
(``recording``), its key (``keys``), what becomes of a finished recording (``finish``), the
graph cache (``cache``), library calls inside a recording (``calls``), capture (``capture``)
and the schedule of a captured graph (``profile``, ``schedule``, ``ios``). It builds on the
runtime layer and hands the runtime frozen graphs (``asyncgpu.runtime.frozen``) to issue.
"""
