-- ARGV: ns, worker, deadline_ms, ttl_ms, hex_1 .. hex_n.
local ns, w, ttl = ARGV[1], ARGV[2], tonumber(ARGV[4])
for i = 5, #ARGV do
  local key = ns .. ':p:' .. ARGV[i]
  redis.call('HSET', key, w, ARGV[3])
  extend(key, ttl)
end
return #ARGV - 4
