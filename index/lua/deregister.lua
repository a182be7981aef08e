-- ARGV: ns, worker, epoch. Removes the registered incarnation and all it holds; keeps its epoch.
local ns, w = ARGV[1], ARGV[2]
if refusal(ns, w, tonumber(ARGV[3])) then return 0 end
clear(ns, w)
redis.call('HDEL', ns .. ':info', w)
redis.call('HDEL', ns .. ':load', w)
redis.call('HDEL', ns .. ':seqs', w)
redis.call('ZREM', ns .. ':live', w)
return 1
