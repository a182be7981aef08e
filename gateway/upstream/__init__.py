"""The gateway's side of the gateway-worker link: channels, worker discovery, dispatch."""
