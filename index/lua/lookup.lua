-- ARGV: ns, now_ms (13 digits), hexes: the chunk hashes in hex (32 chars each), concatenated.
-- Returns a flat list: worker, tiers, worker, tiers, ...
-- where tiers has one char (G/C/P) per leading chunk the worker holds. Each step reads only the
-- fields of the workers still in the running (one HMGET), so the cost follows the matches, not the
-- cluster size.
local ns, now = ARGV[1], ARGV[2]
local active = redis.call('ZRANGEBYSCORE', ns .. ':live', '(' .. now, '+inf')
local runs = {}
local fields, n = {}, 0
local hexes = ARGV[3]
for i = 1, #hexes, 32 do
  if #active == 0 then break end
  if #active ~= n then
    n = #active
    for j = 1, n do
      fields[j] = active[j]
      fields[n + j] = '~' .. active[j]
    end
  end
  local values = redis.call('HMGET', ns .. ':c:' .. string.sub(hexes, i, i + 31), unpack(fields, 1, 2 * n))
  local still = {}
  for j = 1, n do
    local v = values[j]
    if not (v and v > now) then v = values[n + j] end -- a holding beats a pending hint
    if v and v > now then
      local w = active[j]
      still[#still + 1] = w
      local run = runs[w]
      if run == nil then
        run = {}
        runs[w] = run
      end
      run[#run + 1] = string.sub(v, -1)
    end
  end
  active = still
end
local out = {}
for w, run in pairs(runs) do
  out[#out + 1] = w
  out[#out + 1] = table.concat(run)
end
return out
