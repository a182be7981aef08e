"""The gateway's HTTP API (FastAPI): OpenAI- and Anthropic-compatible endpoints."""
