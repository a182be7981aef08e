-- ARGV: P, now, worker, epoch, info_json, load_json, heartbeat_ttl_ms.
-- Returns 'stale' for an epoch older than the registered one, 'taken' for the registered epoch with
-- another record (a second process claiming the same id and epoch), else 'ok'.
local P, now, w, epoch = ARGV[1], now_ms(ARGV[2]), ARGV[3], tonumber(ARGV[4])
local known = redis.call('HGET', P .. ':epochs', w)
if known and epoch < tonumber(known) then return 'stale' end
if known and epoch == tonumber(known) then
  local current = redis.call('HGET', P .. ':info', w)
  if current and current ~= ARGV[5] then return 'taken' end
end
if (not known) or epoch > tonumber(known) or redis.call('HEXISTS', P .. ':info', w) == 0 then
  redis.call('UNLINK', P .. ':h:' .. w, P .. ':s:' .. w)
  redis.call('HSET', P .. ':seqs', w, 0)
end
redis.call('HSET', P .. ':epochs', w, ARGV[4])
redis.call('HSET', P .. ':info', w, ARGV[5])
redis.call('HSET', P .. ':load', w, ARGV[6])
redis.call('ZADD', P .. ':live', int(now + tonumber(ARGV[7])), w)
return 'ok'
