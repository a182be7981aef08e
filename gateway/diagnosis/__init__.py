"""Cache-miss diagnosis: why a request reused fewer cached tokens than it could have, told per request
id, from a bounded per-tenant record of recent requests' shapes (never their text) and the routing
decision. See ``docs/CACHING.md``."""

from kvgate.gateway.diagnosis.causes import Cause, Diagnosis
from kvgate.gateway.diagnosis.config import DiagnosisSettings

__all__ = ["Cause", "Diagnosis", "DiagnosisSettings"]
