-- Prelude of every kvgate index script (scripts are this file + their own body).
-- Workers are spread over groups; every key of a group shares the hash tag P = "{<ns>:<group>}", so a
-- script touches one slot of a Redis Cluster (KEYS[1] is the group's anchor "P:epochs"). ARGV[1] = P.
--   P:h:<worker>  hash  chunk (16 raw bytes) -> "<G|C><expires_ms>"   what the worker holds (TTL: last expiry + slack)
--   P:p:<worker>  hash  chunk -> expires_ms                          gateways' pending routing hints (TTL: theirs)
--   P:s:<worker>  hash  like P:h                                     a snapshot being staged (resync in slices)
--   P:epochs      hash  worker -> registered epoch                   kept after deregistration (fencing)
--   P:seqs        hash  worker -> last applied seq                   -1: the worker must send a snapshot
--   P:info        hash  worker -> registration JSON                  present iff registered
--   P:load        hash  worker -> load JSON
--   P:live        zset  worker -> heartbeat deadline (ms)            absent while purged
-- Times are Redis's own (TIME): writers send durations, never their clock's deadlines. ARGV[2] is ''
-- (use TIME) or a time in ms chosen by the caller (tests that move time by hand).

local function now_ms(arg)
  if arg ~= '' then return tonumber(arg) end
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- A time (or any integer) as Redis arguments want it: digits, never an exponent.
local function int(x) return string.format('%d', x) end

local function extend(key, ttl_ms)
  if ttl_ms <= 0 then return end
  if redis.call('PTTL', key) < ttl_ms then redis.call('PEXPIRE', key, ttl_ms) end
end

-- Number of holdings in hash `key` still valid at `now`.
local function valid_count(key, now)
  local n = 0
  for _, v in ipairs(redis.call('HVALS', key)) do
    if tonumber(string.sub(v, 2)) > now then n = n + 1 end
  end
  return n
end

-- nil when (w, epoch) is the registered incarnation, else the refusal status.
local function refusal(P, w, epoch)
  local known = redis.call('HGET', P .. ':epochs', w)
  if not known then return 'unknown_worker' end
  known = tonumber(known)
  if epoch < known then return 'stale_epoch' end
  if epoch > known or redis.call('HEXISTS', P .. ':info', w) == 0 then return 'unknown_worker' end
  return nil
end

-- HSET of many fields, in calls of at most 4000 arguments (Lua's stack bounds unpack).
local function hset_all(key, args)
  for i = 1, #args, 4000 do
    redis.call('HSET', key, unpack(args, i, math.min(i + 3999, #args)))
  end
end
