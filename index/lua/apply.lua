-- ARGV: P, now, worker, epoch, seq, slack_ms, then per event: op (S store / E evict / X clear),
-- chunk (16 raw bytes), tier, ttl_ms (from now). Returns {status, expected_seq}.
local P, now, w, epoch, seq = ARGV[1], now_ms(ARGV[2]), ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[5])
local refused = refusal(P, w, epoch)
if refused then return {refused, 0} end
local last = tonumber(redis.call('HGET', P .. ':seqs', w) or '0')
if last < 0 then return {'gap', 0} end
if seq ~= last + 1 then return {'gap', last + 1} end
local key = P .. ':h:' .. w
local stores, longest = {}, 0
local function flush()
  if #stores > 0 then hset_all(key, stores); stores = {} end
end
for i = 7, #ARGV, 4 do
  local op = ARGV[i]
  if op == 'S' then
    local ttl = tonumber(ARGV[i + 3])
    stores[#stores + 1] = ARGV[i + 1]
    stores[#stores + 1] = ARGV[i + 2] .. int(now + ttl)
    if ttl > longest then longest = ttl end
  else
    flush()
    if op == 'X' then redis.call('UNLINK', key) else redis.call('HDEL', key, ARGV[i + 1]) end
  end
end
flush()
extend(key, longest + tonumber(ARGV[6]))
redis.call('HSET', P .. ':seqs', w, seq)
return {'applied', seq + 1}
