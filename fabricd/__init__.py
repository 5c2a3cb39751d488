"""fabricd: the fabric controller service and CLI for rail-optimized RoCE GPU fabrics."""

from topology.errors import FabricdError

__version__ = "0.1.0"
__all__ = ["FabricdError", "__version__"]
