-- ARGV: ns, worker, epoch, info_json, load_json, heartbeat_deadline_ms.
-- Returns 'stale' for an epoch older than the registered one, 'taken' for the registered epoch with
-- another record (a second process claiming the same id and epoch), else 'ok'.
local ns, w, epoch = ARGV[1], ARGV[2], tonumber(ARGV[3])
local known = redis.call('HGET', ns .. ':epochs', w)
if known and epoch < tonumber(known) then return 'stale' end
if known and epoch == tonumber(known) then
  local current = redis.call('HGET', ns .. ':info', w)
  if current and current ~= ARGV[4] then return 'taken' end
end
if (not known) or epoch > tonumber(known) or redis.call('HEXISTS', ns .. ':info', w) == 0 then
  clear(ns, w)
  redis.call('HSET', ns .. ':seqs', w, 0)
end
redis.call('HSET', ns .. ':epochs', w, ARGV[3])
redis.call('HSET', ns .. ':info', w, ARGV[4])
redis.call('HSET', ns .. ':load', w, ARGV[5])
redis.call('ZADD', ns .. ':live', ARGV[6], w)
return 'ok'
