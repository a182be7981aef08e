-- ARGV: P, now, worker, ttl_ms, chunk_1 .. chunk_n (16 raw bytes each).
-- A chunk already pending there keeps the later of its two deadlines (hints of different waits).
local P, now, w, ttl = ARGV[1], now_ms(ARGV[2]), ARGV[3], tonumber(ARGV[4])
local key, fields, deadline = P .. ':p:' .. w, {}, now + ttl
for i = 5, #ARGV, 4000 do
  local last = math.min(i + 3999, #ARGV)
  local old = redis.call('HMGET', key, unpack(ARGV, i, last))
  for j = i, last do
    local kept = tonumber(old[j - i + 1])
    fields[#fields + 1] = ARGV[j]
    fields[#fields + 1] = int((kept and kept > deadline) and kept or deadline)
  end
end
hset_all(key, fields)
extend(key, ttl)
return #ARGV - 4
