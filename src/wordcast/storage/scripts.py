"""The Lua scripts that change subscriptions atomically: the record, both word maps and the event that
announces the change in one step, so concurrent routers cannot corrupt the counts. Their
arguments are named (:mod:`.lua`); their keys are positional, each script's comment says which."""

from wordcast.storage.lua import LuaScript

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
-- A subscription that delivers to a webhook counts for that URL too, under "TENANT\tURL"
-- (keys.url_field): what an endpoint's subscriptions are, without a scan. Its alternatives do
-- not; a callback_url "stream:URL" delivers to both the match stream and URL.
local function url_field_of(id, tenant, callback_url)
  if string.find(id, '~', 1, true) then return nil end
  local url = callback_url
  if string.sub(url, 1, 7) == 'stream:' then url = string.sub(url, 8) end
  if url == '' then return nil end
  return tenant .. '\t' .. url
end
"""

# A batch of keyword subscriptions in one script (one round trip and one event for the batch,
# where one script each cost the router more to pack than Redis to run); a single one is a batch
# of one. KEYS: 1 s(W), 2 events, 3 mapping window, 4 tenant counts, 5 matcher counts, then the
# batch's matchers' H(i), then each subscription's bucket. ``batch_json``: {w: window, m: events
# kept, tn: tenants, tr: each tenant's limit in this shard, o: the matchers' ordinals, s: the
# subscriptions, each [id, matcher, query, terms, callback_url, packed record, tenant (1-based),
# placements, stream, matchers (1-based), tag, created (as Python wrote it: exact)]}. Answers
# JSON [event id or "", [per subscription: 1 stored, 0 over its tenant's limit, 2 the id
# exists]], or "-1" when the window moved (nothing stored). The event is one entry, op "batch",
# whose "events" hold each change (records.BATCH_EVENT).
ADD_MANY = LuaScript(
    "batch_json",
    _ALTERNATIVES
    + """
local batch = cjson.decode(batch_json)
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
    local url_field = url_field_of(s[1], batch.tn[t], s[5])
    if url_field then alternatives[url_field] = (alternatives[url_field] or 0) + 1 end
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
                         batch.tn[s[7]], s[8], table.concat(lines, '\\n'), '', s[9], s[11],
                         s[12] or ''}
end
local event_id = ''
if #events > 0 then
  event_id = redis.call('XADD', KEYS[2], 'MAXLEN', '~', batch.m, '*', 'op', 'batch',
                        'events', cjson.encode(events))
end
return cjson.encode({event_id, answers})
""",
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
# counts, then the batch's matchers' H(i), then each record's bucket. ``batch_json``: {m: events
# kept, o: the matchers' ordinals, s: the records, each [id, placements as read, matchers
# (1-based)]}. Answers JSON [event id or "", [per record: 1 deleted, 0 changed since it was read
# (its placements), 2 gone]], its event one "batch" entry as ADD_MANY's.
DELETE_MANY = LuaScript(
    "batch_json",
    _HEAD
    + _LOWER
    + _ALTERNATIVES
    + """
local batch = cjson.decode(batch_json)
local first_record = 5 + #batch.o
local answers, events = {}, {}
for i, s in ipairs(batch.s) do
  local bucket = KEYS[first_record + i - 1]
  local value = redis.call('HGET', bucket, s[1])
  local _, matcher, tenant, placements, terms, body
  if value then _, matcher, tenant, placements, terms, _, body = head_of(value) end
  if not value then
    answers[i] = 2
  elseif placements ~= s[2] then
    answers[i] = 0
  else
    redis.call('HDEL', bucket, s[1])
    lower(KEYS[3], tenant)
    local field = alternatives_of(s[1], tenant)
    if field then lower(KEYS[3], field) end
    local url_field = url_field_of(s[1], tenant, cjson.decode(body)[2] or '')
    if url_field then lower(KEYS[3], url_field) end
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
""",
)

# Re-placement of a batch of keyword records (a mapping change; a single one is a batch of one).
# KEYS: 1 events, 2 matcher counts, then the matchers' H(i), then each record's bucket.
# ``batch_json``: {m: events kept, o: the matchers' ordinals, s: the moves, each [id, placements
# as read, new placements, new matcher, matchers left (1-based), matchers joined (1-based), the
# matchers that hold it after ("0,1")]}. Answers JSON [event id or "", [per move: 1 moved, 0
# changed since it was read]], its event one "batch" entry as ADD_MANY's.
MOVE_MANY = LuaScript(
    "batch_json",
    _HEAD
    + _LOWER
    + """
local batch = cjson.decode(batch_json)
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
""",
)

# Pattern add. KEYS: 1 its bucket, 2 matcher counts, 3 its matcher's anchor map, 4 pattern
# loads, 5 events, 6 tenant counts, 7 mapping window. ``record``: the packed record; ``limit``:
# the tenant's in this shard; ``events_kept``: the event stream's bound.
ADD_PATTERN = LuaScript(
    "id matcher pattern anchor callback_url record events_kept tenant limit window stream tag",
    _ALTERNATIVES
    + """
if redis.call('HEXISTS', KEYS[1], id) == 1 then return false end
if (redis.call('GET', KEYS[7]) or '0 0') ~= window then return -1 end
if tonumber(redis.call('HGET', KEYS[6], tenant) or '0') >= tonumber(limit) then return 0 end
redis.call('HSET', KEYS[1], id, record)
redis.call('HINCRBY', KEYS[2], matcher, 1)
redis.call('HINCRBY', KEYS[6], tenant, 1)
local url_field = url_field_of(id, tenant, callback_url)
if url_field then redis.call('HINCRBY', KEYS[6], url_field, 1) end
redis.call('HINCRBY', KEYS[4], matcher, 1)
local born = ''
if redis.call('HINCRBY', KEYS[3], anchor, 1) == 1 then born = matcher end
return redis.call('XADD', KEYS[5], 'MAXLEN', '~', events_kept, '*', 'op', 'add', 'sub', id,
                  'matcher', matcher, 'pattern', pattern, 'anchor', anchor, 'terms', '',
                  'callback_url', callback_url, 'anchor_joined', born, 'tenant', tenant,
                  'stream', stream, 'tag', tag)
""",
)

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

# A pattern's record (KEYS[1], ``id``) read into locals, or the script answers false: gone, or
# its placements are no longer ``placements_read``.
_PATTERN_AS_READ = """
local value = redis.call('HGET', KEYS[1], id)
if not value then return false end
local _, matcher, tenant, placements, terms, anchor, body = head_of(value)
if placements ~= placements_read then return false end
"""

# Pattern scripts after the add. KEYS: 1 its bucket, 2 events, 3 pattern loads, 4 tenant counts,
# 5 matcher counts, then the anchor map of each of ``matchers`` (the placements').
DELETE_PATTERN = LuaScript(
    "id placements_read events_kept",
    _HEAD
    + _LOWER
    + _ALTERNATIVES
    + _LEAVE
    + _PATTERN_AS_READ
    + """
redis.call('HDEL', KEYS[1], id)
lower(KEYS[4], tenant)
local url_field = url_field_of(id, tenant, cjson.decode(body)[2] or '')
if url_field then lower(KEYS[4], url_field) end
local left = {}
for k = 6, #KEYS do
  leave(KEYS[k], anchor, matchers[k - 5], left)
end
return redis.call('XADD', KEYS[2], 'MAXLEN', '~', events_kept, '*', 'op', 'del', 'sub', id,
                  'matcher', matcher, 'pattern', cjson.decode(body)[6] or '', 'anchor', anchor,
                  'terms', '', 'placements', placements_read,
                  'anchor_left', table.concat(left, ' '))
""",
    rest="matchers",
)

# Re-placement of a pattern (the cluster's matchers change). KEYS as for the delete, the anchor
# maps those of ``matchers``: first the ``leaving`` ones it leaves, then those it joins.
# ``holders``: the matchers that hold it after ("0,1").
MOVE_PATTERN = LuaScript(
    "id placements_read new_placements new_matcher leaving events_kept holders",
    _HEAD
    + _LOWER
    + _LEAVE
    + _PATTERN_AS_READ
    + """
local joined, left = {}, {}
for k = 6, #KEYS do
  local index = k - 6
  local m = matchers[index + 1]
  if index < tonumber(leaving) then
    leave(KEYS[k], anchor, m, left)
  else
    redis.call('HINCRBY', KEYS[5], m, 1)
    if redis.call('HINCRBY', KEYS[k], anchor, 1) == 1 then joined[#joined + 1] = m end
    redis.call('HINCRBY', KEYS[3], m, 1)
  end
end
redis.call('HSET', KEYS[1], id, table.concat(
  {holders, new_matcher, tenant, new_placements, terms, anchor}, '\\t') .. '\\n' .. body)
local f = cjson.decode(body)
return redis.call('XADD', KEYS[2], 'MAXLEN', '~', events_kept, '*', 'op', 'move', 'sub', id,
                  'matcher', new_matcher, 'pattern', f[6] or '', 'anchor', anchor, 'terms', '',
                  'callback_url', f[2] or '', 'tenant', tenant, 'stream', f[5] or '', 'tag', f[9] or '',
                  'placements', new_placements, 'anchor_joined', table.concat(joined, ' '),
                  'anchor_left', table.concat(left, ' '))
""",
    rest="matchers",
)

# A follower's progress through one shard's event stream, and the stream trimmed to what every
# follower still present has read. KEYS: 1 events, 2 the followers' progress (hash name -> "id
# seconds"). A follower silent for ``forget_after_s`` is forgotten (a matcher down that long
# loads in full when it comes back). Answers the number of entries trimmed. Time is Redis's, so
# followers' clocks need not agree.
TRIM_EVENTS = LuaScript(
    "reader read_up_to forget_after_s",
    """
local now = tonumber(redis.call('TIME')[1])
redis.call('HSET', KEYS[2], reader, read_up_to .. ' ' .. now)
local low_ms, low_seq
local readers = redis.call('HGETALL', KEYS[2])
for i = 1, #readers, 2 do
  local ms, seq, seen = string.match(readers[i + 1], '^(%d+)-(%d+) (%d+)$')
  if not ms or now - tonumber(seen) > tonumber(forget_after_s) then
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
""",
)

# A record replaced by ``new_value`` if it still is ``value_read``. KEYS: its bucket, the
# secrets epoch (dispatchers keep secrets until it moves). Answers 1, 0 when it changed
# meanwhile, or false when it is gone.
ROTATE = LuaScript(
    "id value_read new_value",
    """
local value = redis.call('HGET', KEYS[1], id)
if not value then return false end
if value ~= value_read then return 0 end
redis.call('HSET', KEYS[1], id, new_value)
redis.call('INCR', KEYS[2])
return 1
""",
)


# A record from the layout before packing moved into its bucket, once (a second migrating
# process finds it gone). KEYS: 1 the old hash, 2 its bucket, 3 tenant counts, 4 matcher
# counts. ``matchers``: those that hold it.
MIGRATE_RECORD = LuaScript(
    "id record tenant",
    _ALTERNATIVES
    + """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSET', KEYS[2], id, record)
redis.call('DEL', KEYS[1])
redis.call('HINCRBY', KEYS[3], tenant, 1)
local field = alternatives_of(id, tenant)
if field then redis.call('HINCRBY', KEYS[3], field, 1) end
local body = string.match(record, '\\n(.*)$')
local url_field = url_field_of(id, tenant, cjson.decode(body)[2] or '')
if url_field then redis.call('HINCRBY', KEYS[3], url_field, 1) end
for _, m in ipairs(matchers) do redis.call('HINCRBY', KEYS[4], m, 1) end
return 1
""",
    rest="matchers",
)


# Every "TENANT\tURL" count of the shard made anew from its records, once (the records stored
# before the counts existed: December 2026), and the shard marked counted ("\tcounted"). KEYS: 1
# tenant counts, then every bucket. One script: no change can come between the reading and the
# writing (at a million records it holds Redis for about a second, once).
COUNT_URLS = LuaScript(
    "",
    _HEAD
    + _ALTERNATIVES
    + """
if redis.call('HEXISTS', KEYS[1], '\tcounted') == 1 then return 0 end
local fields = redis.call('HKEYS', KEYS[1])
for _, field in ipairs(fields) do
  if string.find(field, '\t', 1, true) then redis.call('HDEL', KEYS[1], field) end
end
local counts = {}
for k = 2, #KEYS do
  local all = redis.call('HGETALL', KEYS[k])
  for i = 1, #all, 2 do
    local _, _, tenant, _, _, _, body = head_of(all[i + 1])
    local url_field = url_field_of(all[i], tenant, cjson.decode(body)[2] or '')
    if url_field then counts[url_field] = (counts[url_field] or 0) + 1 end
  end
end
for field, n in pairs(counts) do redis.call('HSET', KEYS[1], field, n) end
redis.call('HSET', KEYS[1], '\tcounted', 1)
return 1
""",
)
