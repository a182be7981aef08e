"""Gateway-test fixtures: ``cluster``, the dispatch tests' scripted workers (see ``dispatch_cluster``).
The shared ``live`` gateway comes from :mod:`tests.support.live_gateway`."""

from tests.gateway.dispatch_cluster import cluster  # noqa: F401 -- fixture
