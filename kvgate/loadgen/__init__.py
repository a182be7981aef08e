"""Live benchmark (``kvgate bench``): drive a running gateway with a prefix-sharing workload and
measure what its users see (TTFT, throughput, cached-token fraction, errors)."""
