-- ARGV: P, now, worker, epoch, seq, slack_ms, longest_ttl_ms, staged (1: slices were staged).
-- Replaces everything the worker held with its staged snapshot in O(1). Returns {status, expected_seq}.
local P, now, w, seq = ARGV[1], now_ms(ARGV[2]), ARGV[3], tonumber(ARGV[5])
local refused = refusal(P, w, tonumber(ARGV[4]))
if refused then return {refused, 0} end
local key, staged = P .. ':h:' .. w, P .. ':s:' .. w
redis.call('UNLINK', key)
if ARGV[8] == '1' then
  if redis.call('EXISTS', staged) == 0 then return {'gap', 0} end -- the staging hash was lost: start over
  redis.call('RENAME', staged, key)
  redis.call('PEXPIRE', key, tonumber(ARGV[7]) + tonumber(ARGV[6]))
end
redis.call('HSET', P .. ':seqs', w, seq)
return {'applied', seq + 1}
