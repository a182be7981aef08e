"""Text-side helpers of the gateway (torch-free)."""
