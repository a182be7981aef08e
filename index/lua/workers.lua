-- ARGV: P, now. Returns {now, worker, deadline, info_json, load_json, ...} for the group's live workers
-- ('' for a missing record).
local P, now = ARGV[1], now_ms(ARGV[2])
local live = redis.call('ZRANGEBYSCORE', P .. ':live', '(' .. now, '+inf', 'WITHSCORES')
local out = {int(now)}
for i = 1, #live, 2 do
  local w = live[i]
  out[#out + 1] = w
  out[#out + 1] = live[i + 1]
  out[#out + 1] = redis.call('HGET', P .. ':info', w) or ''
  out[#out + 1] = redis.call('HGET', P .. ':load', w) or ''
end
return out
