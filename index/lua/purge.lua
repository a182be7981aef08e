-- ARGV: ns, worker. Drops all the worker holds, takes it out of lookups until its next heartbeat and
-- makes its next batch a gap (so it re-publishes a snapshot). Returns the number of chunks dropped.
local ns, w = ARGV[1], ARGV[2]
if redis.call('HEXISTS', ns .. ':info', w) == 0 then return 0 end
local dropped = clear(ns, w)
redis.call('HSET', ns .. ':seqs', w, -1)
redis.call('ZREM', ns .. ':live', w)
return dropped
