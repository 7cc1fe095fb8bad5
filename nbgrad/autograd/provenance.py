"""The provenance module lives below the data model, in nbgrad/provenance.py (Storage records
where each version bump happened). This name is kept for the notebook layer's imports."""
from ..provenance import (BUMPS, ENABLED, LIB_FILES, NODES, Location, capture,  # noqa: F401
                          enabled, set_enabled)
