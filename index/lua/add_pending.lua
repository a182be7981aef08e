-- ARGV: ns, worker, deadline_ms (13 digits), ttl_ms, hex_1 .. hex_n.
local ns, ttl = ARGV[1], tonumber(ARGV[4])
local field, value = '~' .. ARGV[2], ARGV[3] .. 'P'
for i = 5, #ARGV do
  local key = ns .. ':c:' .. ARGV[i]
  redis.call('HSET', key, field, value)
  extend(key, ttl)
end
return #ARGV - 4
