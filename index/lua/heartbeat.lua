-- ARGV: ns, worker, epoch, load_json, heartbeat_deadline_ms. Returns 1, or 0 if not the registered incarnation.
local ns, w = ARGV[1], ARGV[2]
if refusal(ns, w, tonumber(ARGV[3])) then return 0 end
redis.call('HSET', ns .. ':load', w, ARGV[4])
redis.call('ZADD', ns .. ':live', ARGV[5], w)
return 1
