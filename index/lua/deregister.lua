-- ARGV: P, now, worker, epoch. Removes the registered incarnation and all it holds; keeps its epoch.
local P, w = ARGV[1], ARGV[3]
if refusal(P, w, tonumber(ARGV[4])) then return 0 end
redis.call('UNLINK', P .. ':h:' .. w, P .. ':s:' .. w, P .. ':p:' .. w)
redis.call('HDEL', P .. ':info', w)
redis.call('HDEL', P .. ':load', w)
redis.call('HDEL', P .. ':seqs', w)
redis.call('ZREM', P .. ':live', w)
return 1
