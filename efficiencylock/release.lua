-- Compare-and-delete: delete KEYS[1] only if it still holds this acquisition's
-- value ARGV[1]. Returns 1 if deleted, 0 if the key is absent or someone else's.
if redis.call("GET", KEYS[1]) == ARGV[1] then
	return redis.call("DEL", KEYS[1])
end
return 0
