-- ARGV: P, now, worker, epoch, first (1: start a new snapshot), then per holding: chunk, tier, ttl_ms.
-- Adds one slice of a snapshot to the worker's staging hash. Returns 'ok' or the refusal status.
local P, now, w = ARGV[1], now_ms(ARGV[2]), ARGV[3]
local refused = refusal(P, w, tonumber(ARGV[4]))
if refused then return refused end
local key = P .. ':s:' .. w
if ARGV[5] == '1' then redis.call('UNLINK', key) end
local fields = {}
for i = 6, #ARGV, 3 do
  fields[#fields + 1] = ARGV[i]
  fields[#fields + 1] = ARGV[i + 1] .. int(now + tonumber(ARGV[i + 2]))
end
if #fields > 0 then hset_all(key, fields) end
redis.call('PEXPIRE', key, 600000) -- an abandoned snapshot goes away by itself
return 'ok'
