-- Compare-and-pexpire: extend KEYS[1] to ARGV[2] milliseconds only if it still holds
-- this acquisition's value ARGV[1]. An expired key reads as absent, so a refresh
-- never re-creates a lock. Returns 1 if extended, 0 if absent or someone else's.
if redis.call("GET", KEYS[1]) == ARGV[1] then
	return redis.call("PEXPIRE", KEYS[1], ARGV[2])
end
return 0
