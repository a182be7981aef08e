"""The request core: the spine every front calls (authenticate -> scope -> tokenize -> hash -> route ->
dispatch -> usage), knowing nothing of HTTP or gRPC. :class:`~kvgate.gateway.core.spine.RequestCore`
is its entry point; :mod:`kvgate.gateway.core.request` what fronts hand it."""
