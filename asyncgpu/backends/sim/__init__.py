"""The ``sim`` backend: a CPU simulator of streams and events with randomized schedules."""
