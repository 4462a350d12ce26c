"""Tools for asyncgpu's own tests (fault injection); not used by the library itself."""
