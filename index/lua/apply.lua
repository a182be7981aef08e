-- ARGV: ns, worker, epoch, seq, now_ms, slack_ms, then per event: op (S store / E evict / X clear),
-- hex, tier, expires_ms. Returns {status, expected_seq}.
local ns, w, epoch, seq = ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
local now, slack = tonumber(ARGV[5]), tonumber(ARGV[6])
local refused = refusal(ns, w, epoch)
if refused then return {refused, 0} end
local last = tonumber(redis.call('HGET', ns .. ':seqs', w) or '0')
if last < 0 then return {'gap', 0} end
if seq ~= last + 1 then return {'gap', last + 1} end
for i = 7, #ARGV, 4 do
  local op = ARGV[i]
  if op == 'X' then
    clear(ns, w)
  elseif op == 'E' then
    drop(ns, w, ARGV[i + 1])
  else
    hold(ns, w, ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], now, slack)
  end
end
redis.call('HSET', ns .. ':seqs', w, seq)
return {'applied', seq + 1}
