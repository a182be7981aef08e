-- ARGV: P, now, worker. Drops all the worker holds, takes it out of lookups until its next heartbeat and
-- makes its next batch a gap (so it re-publishes a snapshot). Returns the number of valid chunks dropped.
local P, now, w = ARGV[1], now_ms(ARGV[2]), ARGV[3]
if redis.call('HEXISTS', P .. ':info', w) == 0 then return 0 end
local key = P .. ':h:' .. w
local dropped = valid_count(key, now)
redis.call('UNLINK', key, P .. ':s:' .. w)
redis.call('HSET', P .. ':seqs', w, -1)
redis.call('ZREM', P .. ':live', w)
return dropped
