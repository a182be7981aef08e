-- ARGV: P, now, chain: the request's chunk hashes (16 raw bytes each), concatenated.
-- Returns a flat list: worker, tiers, worker, tiers, ... for the group's live workers that hold a
-- prefix, where tiers has one char (G/C/P) per leading chunk held. Each worker's run is read in
-- windows that double (8, 16, 32, ... chunks, one HMGET each) and ends at its first miss, so the
-- cost follows what is held, not the chain's length times the workers.
local P, now, chain = ARGV[1], now_ms(ARGV[2]), ARGV[3]
local n = #chain / 16
local out = {}
for _, w in ipairs(redis.call('ZRANGEBYSCORE', P .. ':live', '(' .. now, '+inf')) do
  local hk, pk = P .. ':h:' .. w, P .. ':p:' .. w
  local run, i, window, open = {}, 0, 8, true
  while open and i < n do
    local last, ids = math.min(n, i + window), {}
    for j = i, last - 1 do ids[#ids + 1] = string.sub(chain, j * 16 + 1, j * 16 + 16) end
    local held, pending = redis.call('HMGET', hk, unpack(ids)), nil
    for k = 1, #ids do
      local v = held[k]
      if v and tonumber(string.sub(v, 2)) > now then
        run[#run + 1] = string.sub(v, 1, 1)
      else
        pending = pending or redis.call('HMGET', pk, unpack(ids))
        local p = pending[k]
        if p and tonumber(p) > now then run[#run + 1] = 'P' else open = false; break end
      end
    end
    i, window = last, math.min(window * 2, 1024)
  end
  if #run > 0 then
    out[#out + 1] = w
    out[#out + 1] = table.concat(run)
  end
end
return out
