"""The Lua scripts that read subscription records in bulk, changing nothing (those that change
them are :mod:`.scripts`'). Their arguments are named (:mod:`.lua`)."""

from wordcast.storage.lua import LuaScript

# Records by id: KEYS each one's bucket, ``ids`` the ids; answers each packed record, or nil. One
# reply for a batch of a thousand, where a pipeline of HGETs cost redis-py a parse and a
# timeout apiece, several times what Redis spends.
RECORDS_BY_ID = LuaScript(
    "",
    """
local out = {}
for i, key in ipairs(KEYS) do out[i] = redis.call('HGET', key, ids[i]) end
return out
""",
    rest="ids",
)

# The records of some of a shard's buckets (KEYS) that ``matcher`` (an ordinal) holds: a flat
# list id, packed record, … . A restarting matcher reads a million this way, a few dozen
# buckets to a call, without a reply for the records other matchers hold.
RECORDS_OF = LuaScript(
    "matcher",
    """
local out = {}
local wanted = ',' .. matcher .. ','
for _, key in ipairs(KEYS) do
  local all = redis.call('HGETALL', key)
  for i = 1, #all, 2 do
    local matchers = string.match(all[i + 1], '^([^\t]*)\t')
    if string.find(',' .. matchers .. ',', wanted, 1, true) then
      out[#out + 1] = all[i]
      out[#out + 1] = all[i + 1]
    end
  end
end
return out
""",
)

# A page of ``tenant``'s records: KEYS are consecutive buckets, the first scanned from HSCAN
# ``cursor``; ``wanted``: how many records (scanned that many at a time). Answers [buckets
# passed, HSCAN cursor in the next one, flat list id, packed record, …]: a page holds about as
# many as wanted, or what the buckets held.
TENANT_PAGE = LuaScript(
    "tenant wanted cursor",
    """
local out = {}
for k, key in ipairs(KEYS) do
  repeat
    local reply = redis.call('HSCAN', key, cursor, 'COUNT', wanted)
    cursor = reply[1]
    local found = reply[2]
    for i = 1, #found, 2 do
      if string.match(found[i + 1], '^[^\t]*\t[^\t]*\t([^\t]*)\t') == tenant then
        out[#out + 1] = found[i]
        out[#out + 1] = found[i + 1]
      end
    end
    if #out >= 2 * tonumber(wanted) then
      if cursor == '0' then return {k, '0', out} end
      return {k - 1, cursor, out}
    end
  until cursor == '0'
end
return {#KEYS, '0', out}
""",
)
