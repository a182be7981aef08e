"""Tenants: who a request belongs to (API keys), which cache namespace it may use (salts derived on
the server), and how much it may ask for (rate limits)."""

from kvgate.gateway.tenancy.keys import KeyRing, hash_key, new_key
from kvgate.gateway.tenancy.rate_limit import RateLimiter
from kvgate.gateway.tenancy.tenant import ANONYMOUS, Caller, RateLimit, Tenant

__all__ = ["ANONYMOUS", "Caller", "KeyRing", "RateLimit", "RateLimiter", "Tenant", "hash_key", "new_key"]
