-- Prelude of every kvgate index script (scripts are this file + their own body).
-- Key layout, ns = the namespace:
--   ns:c:<hex>     hash  worker  -> "<expires_ms:13 digits><G|C>"  who holds a chunk (TTL: last expiry + slack)
--                        ~worker -> "<expires_ms:13 digits>P"      a gateway's pending routing hint
--   ns:o:<worker>  set   <hex>                                    chunks a worker holds (one-step purge)
--   ns:epochs      hash  worker -> registered epoch               kept after deregistration (fencing)
--   ns:seqs        hash  worker -> last applied seq               -1: the worker must send a snapshot
--   ns:info        hash  worker -> registration JSON              present iff registered
--   ns:load        hash  worker -> load JSON
--   ns:live        zset  worker -> heartbeat deadline (ms)        absent while purged
-- Scripts build keys from ns, so the index needs a standalone Redis (or a primary with replicas),
-- not Redis Cluster. Times are unix ms from the caller's clock, zero-padded to 13 digits so that
-- "still valid" is one string comparison (value > now). Holdings carry no epoch: every write is
-- fenced by epoch, and a new epoch clears the old incarnation's holdings in the same script.

local function extend(key, ttl_ms)
  if ttl_ms <= 0 then return end
  if redis.call('PTTL', key) < ttl_ms then redis.call('PEXPIRE', key, ttl_ms) end
end

local function hold(ns, w, hex, tier, expires, now, slack)
  local ck = ns .. ':c:' .. hex
  local ok = ns .. ':o:' .. w
  redis.call('HSET', ck, w, expires .. tier)
  redis.call('SADD', ok, hex)
  local ttl = tonumber(expires) - now + slack
  extend(ck, ttl)
  extend(ok, ttl)
end

local function drop(ns, w, hex)
  redis.call('HDEL', ns .. ':c:' .. hex, w)
  redis.call('SREM', ns .. ':o:' .. w, hex)
end

local function clear(ns, w)
  local ok = ns .. ':o:' .. w
  local owned = redis.call('SMEMBERS', ok)
  for _, hex in ipairs(owned) do redis.call('HDEL', ns .. ':c:' .. hex, w) end
  redis.call('DEL', ok)
  return #owned
end

-- nil when (w, epoch) is the registered incarnation, else the refusal status.
local function refusal(ns, w, epoch)
  local known = redis.call('HGET', ns .. ':epochs', w)
  if not known then return 'unknown_worker' end
  known = tonumber(known)
  if epoch < known then return 'stale_epoch' end
  if epoch > known or redis.call('HEXISTS', ns .. ':info', w) == 0 then return 'unknown_worker' end
  return nil
end
