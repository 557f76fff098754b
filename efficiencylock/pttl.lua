-- Compare-and-pttl: the remaining time to live of KEYS[1] in milliseconds if it
-- still holds this acquisition's value ARGV[1]; -3 if absent or someone else's.
if redis.call("GET", KEYS[1]) == ARGV[1] then
	return redis.call("PTTL", KEYS[1])
end
return -3
