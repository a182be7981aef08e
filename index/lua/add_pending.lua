-- ARGV: P, now, worker, ttl_ms, chunk_1 .. chunk_n (16 raw bytes each).
local P, now, w, ttl = ARGV[1], now_ms(ARGV[2]), ARGV[3], tonumber(ARGV[4])
local key, fields = P .. ':p:' .. w, {}
for i = 5, #ARGV do
  fields[#fields + 1] = ARGV[i]
  fields[#fields + 1] = int(now + ttl)
end
hset_all(key, fields)
extend(key, ttl)
return #ARGV - 4
