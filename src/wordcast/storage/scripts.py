"""The Lua scripts that change subscriptions atomically: the record, both word maps and the event that
announces the change in one step, so concurrent routers cannot corrupt the counts."""

# Every record script reads a packed record's head (:mod:`wordcast.storage.records`) with this.
_HEAD = """
local function head_of(v)
  return string.match(v, '^([^\\t]*)\\t([^\\t]*)\\t([^\\t]*)\\t([^\\t]*)\\t([^\\t]*)\\t([^\\n]*)\\n(.*)$')
end
"""

# A tenant's records count against its limit; the later alternatives of its boolean queries (ids
# with "~", query.boolean.PART_SEPARATOR) are also counted apart, under "TENANT alternatives"
# (keys.alternatives_field), so that its subscriptions are the one count less the other.
_ALTERNATIVES = """
local function alternatives_of(id, tenant)
  if string.find(id, '~', 1, true) then return tenant .. ' alternatives' end
end
"""

# A batch of keyword subscriptions in one script (one round trip and one event for the batch,
# where one script each cost the router more to pack than Redis to run); a single one is a batch
# of one. KEYS: 1 s(W), 2 events, 3 mapping window, 4 tenant counts, 5 matcher counts, then the
# batch's matchers' H(i), then each subscription's bucket. ARGV[1]: JSON {w: window, m: events
# kept, tn: tenants, tr: each tenant's limit in this shard, o: the matchers' ordinals, s: the
# subscriptions, each [id, matcher, query, terms, callback_url, packed record, tenant (1-based),
# placements, stream, matchers (1-based), tag]}. Answers JSON [event id or "", [per subscription:
# 1 stored, 0 over its tenant's limit, 2 the id exists]], or "-1" when the window moved
# (nothing stored). The event is one entry, op "batch", whose "events" hold each change
# (records.BATCH_EVENT).
ADD_MANY = (
    _ALTERNATIVES
    + """
local batch = cjson.decode(ARGV[1])
if (redis.call('GET', KEYS[3]) or '0 0') ~= batch.w then return '-1' end
local first_record = 6 + #batch.o
local counts, added = {}, {}
local alternatives = {}
for t, tenant in ipairs(batch.tn) do
  counts[t], added[t] = tonumber(redis.call('HGET', KEYS[4], tenant) or '0'), 0
end
-- Store each record or refuse it, and sum what the batch adds to each count: s(W) (more) and
-- each H(i) (more_on), with the first record that brings each word.
local answers, stored, on = {}, {}, {}
local more, first, order, more_on, first_on, order_on = {}, {}, {}, {}, {}, {}
for m = 1, #batch.o do on[m], more_on[m], first_on[m], order_on[m] = 0, {}, {}, {} end
for i, s in ipairs(batch.s) do
  local t, bucket = s[7], KEYS[first_record + i - 1]
  if counts[t] + added[t] >= batch.tr[t] then
    answers[i] = redis.call('HEXISTS', bucket, s[1]) == 1 and 2 or 0
  elseif redis.call('HSETNX', bucket, s[1], s[6]) == 0 then
    answers[i] = 2
  else
    answers[i], added[t], stored[#stored + 1] = 1, added[t] + 1, i
    local field = alternatives_of(s[1], batch.tn[t])
    if field then alternatives[field] = (alternatives[field] or 0) + 1 end
    for term in string.gmatch(s[4], '%S+') do
      if not more[term] then
        more[term], first[term], order[#order + 1] = 0, i, term
      end
      more[term] = more[term] + 1
      for _, m in ipairs(s[10]) do
        if not more_on[m][term] then
          more_on[m][term], first_on[m][term], order_on[m][#order_on[m] + 1] = 0, i, term
        end
        more_on[m][term] = more_on[m][term] + 1
      end
    end
    for _, m in ipairs(s[10]) do on[m] = on[m] + 1 end
  end
end
-- Each count changes once for the batch (a command apiece per record and word cost Redis more
-- than the rest of the script); a word new to s(W) or to an H(i) is so for the first record
-- that brought it, as when they are added one by one.
local born, held = {}, {}
for _, term in ipairs(order) do
  if redis.call('HINCRBY', KEYS[1], term, more[term]) == more[term] then
    born[first[term] .. ' ' .. term] = true
  end
end
for m = 1, #batch.o do
  if on[m] > 0 then redis.call('HINCRBY', KEYS[5], batch.o[m], on[m]) end
  for _, term in ipairs(order_on[m]) do
    local n = more_on[m][term]
    if redis.call('HINCRBY', KEYS[5 + m], term, n) == n then
      held[m .. ' ' .. first_on[m][term] .. ' ' .. term] = true
    end
  end
end
for t, tenant in ipairs(batch.tn) do
  if added[t] > 0 then redis.call('HINCRBY', KEYS[4], tenant, added[t]) end
end
for field, n in pairs(alternatives) do redis.call('HINCRBY', KEYS[4], field, n) end
local events = {}
for _, i in ipairs(stored) do
  local s = batch.s[i]
  local new_words, lines = {}, {}
  for term in string.gmatch(s[4], '%S+') do
    if born[i .. ' ' .. term] then new_words[#new_words + 1] = term end
  end
  for _, m in ipairs(s[10]) do
    local new = {}
    for term in string.gmatch(s[4], '%S+') do
      if held[m .. ' ' .. i .. ' ' .. term] then new[#new + 1] = term end
    end
    if #new > 0 then lines[#lines + 1] = batch.o[m] .. ' ' .. table.concat(new, ' ') end
  end
  events[#events + 1] = {'add', s[1], s[2], s[4], s[5], s[3], table.concat(new_words, ' '),
                         batch.tn[s[7]], s[8], table.concat(lines, '\\n'), '', s[9], s[11]}
end
local event_id = ''
if #events > 0 then
  event_id = redis.call('XADD', KEYS[2], 'MAXLEN', '~', batch.m, '*', 'op', 'batch',
                        'events', cjson.encode(events))
end
return cjson.encode({event_id, answers})
"""
)

# A count in a hash lowered by one, the field gone at zero; and a record's words so in a word map.
_LOWER = """
local function lower(key, field)
  if redis.call('HINCRBY', key, field, -1) <= 0 then redis.call('HDEL', key, field) end
end
-- A record's words (space-separated) lowered by one in a word map, each gone at zero; answers
-- those gone.
local function lower_words(map, terms)
  local gone = {}
  for term in string.gmatch(terms, '%S+') do
    if redis.call('HINCRBY', map, term, -1) <= 0 then
      redis.call('HDEL', map, term)
      gone[#gone + 1] = term
    end
  end
  return gone
end
"""

# A batch of keyword records deleted in one script (a boolean query's later alternatives before
# it; a single one is a batch of one). KEYS: 1 s(W), 2 events, 3 tenant counts, 4 matcher
# counts, then the batch's matchers' H(i), then each record's bucket. ARGV[1]: JSON {m: events
# kept, o: the matchers' ordinals, s: the records, each [id, placements as read, matchers
# (1-based)]}. Answers JSON [event id or "", [per record: 1 deleted, 0 changed since it was read
# (its placements), 2 gone]], its event one "batch" entry as ADD_MANY's.
DELETE_MANY = (
    _HEAD
    + _LOWER
    + _ALTERNATIVES
    + """
local batch = cjson.decode(ARGV[1])
local first_record = 5 + #batch.o
local answers, events = {}, {}
for i, s in ipairs(batch.s) do
  local bucket = KEYS[first_record + i - 1]
  local value = redis.call('HGET', bucket, s[1])
  local _, matcher, tenant, placements, terms
  if value then _, matcher, tenant, placements, terms = head_of(value) end
  if not value then
    answers[i] = 2
  elseif placements ~= s[2] then
    answers[i] = 0
  else
    redis.call('HDEL', bucket, s[1])
    lower(KEYS[3], tenant)
    local field = alternatives_of(s[1], tenant)
    if field then lower(KEYS[3], field) end
    local dropped = {}
    for _, m in ipairs(s[3]) do
      local words = KEYS[4 + m]
      lower(KEYS[4], batch.o[m])
      local gone = lower_words(words, terms)
      if #gone > 0 then dropped[#dropped + 1] = batch.o[m] .. ' ' .. table.concat(gone, ' ') end
    end
    local died = lower_words(KEYS[1], terms)
    events[#events + 1] = {'del', s[1], matcher, terms, '', '', table.concat(died, ' '), '',
                           s[2], '', table.concat(dropped, '\\n'), ''}
    answers[i] = 1
  end
end
local event_id = ''
if #events > 0 then
  event_id = redis.call('XADD', KEYS[2], 'MAXLEN', '~', batch.m, '*', 'op', 'batch',
                        'events', cjson.encode(events))
end
return cjson.encode({event_id, answers})
"""
)

# Re-placement of a batch of keyword records (a mapping change; a single one is a batch of one).
# KEYS: 1 events, 2 matcher counts, then the matchers' H(i), then each record's bucket.
# ARGV[1]: JSON {m: events kept, o: the matchers' ordinals, s: the moves, each [id, placements
# as read, new placements, new matcher, matchers left (1-based), matchers joined (1-based), the
# matchers that hold it after ("0,1")]}. Answers JSON [event id or "", [per move: 1 moved, 0
# changed since it was read]], its event one "batch" entry as ADD_MANY's.
MOVE_MANY = (
    _HEAD
    + _LOWER
    + """
local batch = cjson.decode(ARGV[1])
local answers, events = {}, {}
for i, s in ipairs(batch.s) do
  local bucket = KEYS[2 + #batch.o + i]
  local value = redis.call('HGET', bucket, s[1])
  local _, tenant, placements, terms, anchor, body
  if value then _, _, tenant, placements, terms, anchor, body = head_of(value) end
  if not value or placements ~= s[2] then
    answers[i] = 0
  else
    local held, dropped = {}, {}
    for _, m in ipairs(s[5]) do
      local words = KEYS[2 + m]
      lower(KEYS[2], batch.o[m])
      local gone = lower_words(words, terms)
      if #gone > 0 then dropped[#dropped + 1] = batch.o[m] .. ' ' .. table.concat(gone, ' ') end
    end
    for _, m in ipairs(s[6]) do
      local words = KEYS[2 + m]
      redis.call('HINCRBY', KEYS[2], batch.o[m], 1)
      local new = {}
      for term in string.gmatch(terms, '%S+') do
        if redis.call('HINCRBY', words, term, 1) == 1 then new[#new + 1] = term end
      end
      if #new > 0 then held[#held + 1] = batch.o[m] .. ' ' .. table.concat(new, ' ') end
    end
    redis.call('HSET', bucket, s[1], table.concat({s[7], s[4], tenant, s[3], terms, anchor}, '\\t')
                                     .. '\\n' .. body)
    local f = cjson.decode(body)
    events[#events + 1] = {'move', s[1], s[4], terms, f[2] or '', f[1] or '', '', tenant,
                           s[3], table.concat(held, '\\n'), table.concat(dropped, '\\n'),
                           f[5] or '', f[9] or ''}
    answers[i] = 1
  end
end
local event_id = ''
if #events > 0 then
  event_id = redis.call('XADD', KEYS[1], 'MAXLEN', '~', batch.m, '*', 'op', 'batch',
                        'events', cjson.encode(events))
end
return cjson.encode({event_id, answers})
"""
)

# Pattern add. KEYS: 1 its bucket, 2 matcher counts, 3 its matcher's anchor map, 4 pattern
# loads, 5 events, 6 tenant counts, 7 mapping window. ARGV: 1 id, 2 matcher, 3 pattern,
# 4 anchor, 5 callback_url, 6 packed record, 7 events kept, 8 tenant, 9 its limit in this shard,
# 10 window, 11 stream, 12 tag.
ADD_PATTERN = """
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then return false end
if (redis.call('GET', KEYS[7]) or '0 0') ~= ARGV[10] then return -1 end
if tonumber(redis.call('HGET', KEYS[6], ARGV[8]) or '0') >= tonumber(ARGV[9]) then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[6])
redis.call('HINCRBY', KEYS[2], ARGV[2], 1)
redis.call('HINCRBY', KEYS[6], ARGV[8], 1)
redis.call('HINCRBY', KEYS[4], ARGV[2], 1)
local born = ''
if redis.call('HINCRBY', KEYS[3], ARGV[4], 1) == 1 then born = ARGV[2] end
return redis.call('XADD', KEYS[5], 'MAXLEN', '~', ARGV[7], '*', 'op', 'add', 'sub', ARGV[1],
                  'matcher', ARGV[2], 'pattern', ARGV[3], 'anchor', ARGV[4], 'terms', '',
                  'callback_url', ARGV[5], 'anchor_joined', born, 'tenant', ARGV[8],
                  'stream', ARGV[11], 'tag', ARGV[12])
"""

# A pattern leaving matcher m (KEYS 3 and 5: pattern loads, matcher counts): its anchor's count
# in m's anchor map lowered, m added to ``left`` when it was the last.
_LEAVE = """
local function leave(anchors, anchor, m, left)
  lower(KEYS[5], m)
  lower(KEYS[3], m)
  if redis.call('HINCRBY', anchors, anchor, -1) <= 0 then
    redis.call('HDEL', anchors, anchor)
    left[#left + 1] = m
  end
end
"""

# A pattern's record (KEYS[1], its id ARGV[1]) read into locals, or the script answers false:
# gone, or its placements are no longer those read (ARGV[2]).
_PATTERN_AS_READ = """
local value = redis.call('HGET', KEYS[1], ARGV[1])
if not value then return false end
local _, matcher, tenant, placements, terms, anchor, body = head_of(value)
if placements ~= ARGV[2] then return false end
"""

# Pattern scripts after the add. KEYS: 1 its bucket, 2 events, 3 pattern loads, 4 tenant counts,
# 5 matcher counts, then for each matcher of the placements (ARGV from 4 on) its anchor map.
# ARGV: 1 id, 2 placements as read, 3 events kept.
DELETE_PATTERN = (
    _HEAD
    + _LOWER
    + _LEAVE
    + _PATTERN_AS_READ
    + """
redis.call('HDEL', KEYS[1], ARGV[1])
lower(KEYS[4], tenant)
local left = {}
for k = 6, #KEYS do
  local m = ARGV[4 + k - 6]
  leave(KEYS[k], anchor, m, left)
end
return redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[3], '*', 'op', 'del', 'sub', ARGV[1],
                  'matcher', matcher, 'pattern', cjson.decode(body)[6] or '', 'anchor', anchor,
                  'terms', '', 'placements', ARGV[2], 'anchor_left', table.concat(left, ' '))
"""
)

# Re-placement of a pattern (the cluster's matchers change). KEYS as for the delete, but the
# anchor maps are first ARGV[5] matchers it leaves, then those it joins (ordinals from ARGV[8]
# on). ARGV: 1 id, 2 placements as read, 3 new placements, 4 new matcher, 5 how many it leaves,
# 6 events kept, 7 the matchers that hold it after ("0,1").
MOVE_PATTERN = (
    _HEAD
    + _LOWER
    + _LEAVE
    + _PATTERN_AS_READ
    + """
local leaving = tonumber(ARGV[5])
local joined, left = {}, {}
for k = 6, #KEYS do
  local index = k - 6
  local m = ARGV[8 + index]
  if index < leaving then
    leave(KEYS[k], anchor, m, left)
  else
    redis.call('HINCRBY', KEYS[5], m, 1)
    if redis.call('HINCRBY', KEYS[k], anchor, 1) == 1 then joined[#joined + 1] = m end
    redis.call('HINCRBY', KEYS[3], m, 1)
  end
end
redis.call('HSET', KEYS[1], ARGV[1],
           table.concat({ARGV[7], ARGV[4], tenant, ARGV[3], terms, anchor}, '\\t') .. '\\n' .. body)
local f = cjson.decode(body)
return redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[6], '*', 'op', 'move', 'sub', ARGV[1],
                  'matcher', ARGV[4], 'pattern', f[6] or '', 'anchor', anchor, 'terms', '',
                  'callback_url', f[2] or '', 'tenant', tenant, 'stream', f[5] or '', 'tag', f[9] or '',
                  'placements', ARGV[3], 'anchor_joined', table.concat(joined, ' '),
                  'anchor_left', table.concat(left, ' '))
"""
)

# A follower's progress through one shard's event stream, and the stream trimmed to what every
# follower still present has read. KEYS: 1 events, 2 the followers' progress (hash name -> "id
# seconds"). ARGV: 1 the follower, 2 the id it has read up to, 3 seconds after which a silent
# follower is forgotten (a matcher down that long loads in full when it comes back). Answers
# the number of entries trimmed. Time is Redis's, so followers' clocks need not agree.
TRIM_EVENTS = """
local now = tonumber(redis.call('TIME')[1])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2] .. ' ' .. now)
local low_ms, low_seq
local readers = redis.call('HGETALL', KEYS[2])
for i = 1, #readers, 2 do
  local ms, seq, seen = string.match(readers[i + 1], '^(%d+)-(%d+) (%d+)$')
  if not ms or now - tonumber(seen) > tonumber(ARGV[3]) then
    redis.call('HDEL', KEYS[2], readers[i])
  else
    ms, seq = tonumber(ms), tonumber(seq)
    if not low_ms or ms < low_ms or (ms == low_ms and seq < low_seq) then
      low_ms, low_seq = ms, seq
    end
  end
end
if not low_ms or low_ms == 0 then return 0 end
return redis.call('XTRIM', KEYS[1], 'MINID', '~', string.format('%d-%d', low_ms, low_seq))
"""

# A record replaced by a new value if it still is the one read. KEYS: its bucket, the secrets
# epoch (dispatchers keep secrets until it moves). ARGV: id, the value read, the new value.
# Answers 1, 0 when it changed meanwhile, or false when it is gone.
ROTATE = """
local value = redis.call('HGET', KEYS[1], ARGV[1])
if not value then return false end
if value ~= ARGV[2] then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
redis.call('INCR', KEYS[2])
return 1
"""


# Records by id: KEYS each one's bucket, ARGV the ids; answers each packed record, or nil. One
# reply for a batch of a thousand, where a pipeline of HGETs cost redis-py a parse and a
# timeout apiece, several times what Redis spends.
RECORDS_BY_ID = """
local out = {}
for i, key in ipairs(KEYS) do out[i] = redis.call('HGET', key, ARGV[i]) end
return out
"""

# The records of some of a shard's buckets (KEYS) that a matcher holds (ARGV[1], its ordinal):
# a flat list id, packed record, … . A restarting matcher reads a million this way, a few dozen
# buckets to a call, without a reply for the records other matchers hold.
RECORDS_OF = """
local out = {}
local wanted = ',' .. ARGV[1] .. ','
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
"""

# A page of a tenant's records: KEYS are consecutive buckets, the first scanned from HSCAN cursor
# ARGV[3]; ARGV: 1 the tenant, 2 how many records are wanted (scanned that many at a time).
# Answers [buckets passed, HSCAN cursor in the next one, flat list id, packed record, …]: a page
# holds about as many as wanted, or what the buckets held.
TENANT_PAGE = """
local out, cursor = {}, ARGV[3]
for k, key in ipairs(KEYS) do
  repeat
    local reply = redis.call('HSCAN', key, cursor, 'COUNT', ARGV[2])
    cursor = reply[1]
    local found = reply[2]
    for i = 1, #found, 2 do
      if string.match(found[i + 1], '^[^\t]*\t[^\t]*\t([^\t]*)\t') == ARGV[1] then
        out[#out + 1] = found[i]
        out[#out + 1] = found[i + 1]
      end
    end
    if #out >= 2 * tonumber(ARGV[2]) then
      if cursor == '0' then return {k, '0', out} end
      return {k - 1, cursor, out}
    end
  until cursor == '0'
end
return {#KEYS, '0', out}
"""

# A record from the layout before packing moved into its bucket, once (a second migrating
# process finds it gone). KEYS: 1 the old hash, 2 its bucket, 3 tenant counts, 4 matcher
# counts. ARGV: 1 id, 2 the packed record, 3 tenant, then the matchers that hold it.
MIGRATE_RECORD = (
    _ALTERNATIVES
    + """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
redis.call('DEL', KEYS[1])
redis.call('HINCRBY', KEYS[3], ARGV[3], 1)
local field = alternatives_of(ARGV[1], ARGV[3])
if field then redis.call('HINCRBY', KEYS[3], field, 1) end
for k = 4, #ARGV do redis.call('HINCRBY', KEYS[4], ARGV[k], 1) end
return 1
"""
)
