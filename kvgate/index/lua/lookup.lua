-- ARGV: ns, now_ms, hex_1 .. hex_n. Returns a flat list: worker, tiers, worker, tiers, ...
-- where tiers has one char (G/C/P) per leading chunk the worker holds.
local ns, now = ARGV[1], tonumber(ARGV[2])
local epochs, live = {}, {}
local e = redis.call('HGETALL', ns .. ':epochs')
for i = 1, #e, 2 do epochs[e[i]] = e[i + 1] end
for _, w in ipairs(redis.call('ZRANGEBYSCORE', ns .. ':live', '(' .. ARGV[2], '+inf')) do
  live[w] = epochs[w]
end
local runs, active = {}, nil
for i = 3, #ARGV do
  local found = {}
  local p = redis.call('HGETALL', ns .. ':p:' .. ARGV[i])
  for j = 1, #p, 2 do
    if live[p[j]] and tonumber(p[j + 1]) > now then found[p[j]] = 'P' end
  end
  local c = redis.call('HGETALL', ns .. ':c:' .. ARGV[i])
  for j = 1, #c, 2 do
    local tier, expires, epoch = string.match(c[j + 1], '^(%a)|(%d+)|(%d+)$')
    if live[c[j]] == epoch and tonumber(expires) > now then found[c[j]] = tier end
  end
  local step = {}
  local any = false
  for w, tier in pairs(found) do
    if active == nil or active[w] then
      step[w] = true
      any = true
      local run = runs[w] or {}
      run[#run + 1] = tier
      runs[w] = run
    end
  end
  if not any then break end
  active = step
end
local out = {}
for w, run in pairs(runs) do
  out[#out + 1] = w
  out[#out + 1] = table.concat(run)
end
return out
