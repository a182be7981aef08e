-- ARGV: P, now, worker, epoch, load_json, heartbeat_ttl_ms. Returns 1, or 0 if not the registered incarnation.
local P, now, w = ARGV[1], now_ms(ARGV[2]), ARGV[3]
if refusal(P, w, tonumber(ARGV[4])) then return 0 end
redis.call('HSET', P .. ':load', w, ARGV[5])
redis.call('ZADD', P .. ':live', int(now + tonumber(ARGV[6])), w)
return 1
