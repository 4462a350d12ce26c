"""asyncgpu's benchmark suite (the GrCUDA paper's workloads) and its harness."""
