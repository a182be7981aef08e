"""Worker-service tests run with one torch thread, as the model tests do (the 2 cores are shared).
Their servers come from the shared fixtures in :mod:`tests.support.real_workers`."""

from tests.workers.model.conftest import one_torch_thread  # noqa: F401 -- autouse, one thread here too
