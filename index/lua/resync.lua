-- ARGV: ns, worker, epoch, seq, now_ms, slack_ms, then per holding: hex, tier, expires_ms.
-- Replaces everything the worker held. Returns {status, expected_seq}.
local ns, w, epoch, seq = ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
local now, slack = tonumber(ARGV[5]), tonumber(ARGV[6])
local refused = refusal(ns, w, epoch)
if refused then return {refused, 0} end
clear(ns, w)
for i = 7, #ARGV, 3 do
  hold(ns, w, ARGV[i], ARGV[i + 1], ARGV[i + 2], now, slack)
end
redis.call('HSET', ns .. ':seqs', w, seq)
return {'applied', seq + 1}
