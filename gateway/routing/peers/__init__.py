"""Faithful versions of the peers' routers, run by the simulator beside kvgate's policy (and
selectable by a gateway, for comparison on a live cluster).

Each follows the peer's published documentation and source defaults, named in its docstring:
SGLang's cache-aware router (:mod:`.sglang`), Ray Serve's ``PrefixCacheAffinityRouter``
(:mod:`.ray_serve`), Dynamo's KV router (:mod:`.dynamo`) and llm-d's precise prefix-cache scorer
with its load scorers (:mod:`.llmd`). SGLang and Ray Serve keep an approximate record of what they
routed where (:mod:`.routed_tree`); Dynamo and llm-d read the workers' KV events, as kvgate does
(the candidates' matches, without kvgate's pending entries).
"""
