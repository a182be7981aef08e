"""The cluster layer: Ray placement of worker actors, supervision, and the gateway in front of them.

``kvgate up`` walks through it: :mod:`ray_session` starts (or joins) Ray, :mod:`worker_pool` places one
:class:`~kvgate.workers.ray_actor.WorkerActor` per slot (SPREAD across nodes) and keeps starting them
after Ray restarts them, :mod:`gateway_server` serves the gateway's HTTP and gRPC fronts in the same
event loop, and :mod:`stack` wires it all from one :class:`~kvgate.cluster.settings.ClusterSettings`.
"""
