"""The Lua scripts that change subscriptions atomically: the record, both word maps and the event that
announces the change in one step, so concurrent routers cannot corrupt the counts."""

# Keyword scripts. KEYS: 1 record, 2 s(W), 3 events, 4 tenant's set, 5 mapping window, then for each
# matcher of the placements its subscription set and its word map H(i); those matchers' ordinals
# are the last ARGV (from ARGV[14] for the add, ARGV[4] for the delete), for the event to name.
ADD = """
if redis.call('EXISTS', KEYS[1]) == 1 then return false end
if (redis.call('GET', KEYS[5]) or '0 0') ~= ARGV[12] then return -1 end
if redis.call('SCARD', KEYS[4]) >= tonumber(ARGV[9]) then return 0 end
redis.call('HSET', KEYS[1], 'query', ARGV[3], 'terms', ARGV[4], 'callback_url', ARGV[5],
           'matcher', ARGV[2], 'created', ARGV[6], 'tenant', ARGV[8], 'secret', ARGV[10],
           'placements', ARGV[11], 'stream', ARGV[13])
redis.call('SADD', KEYS[4], ARGV[1])
local held = {}
for k = 6, #KEYS, 2 do
  redis.call('SADD', KEYS[k], ARGV[1])
  local new = {}
  for term in string.gmatch(ARGV[4], '%S+') do
    if redis.call('HINCRBY', KEYS[k + 1], term, 1) == 1 then new[#new + 1] = term end
  end
  if #new > 0 then held[#held + 1] = ARGV[14 + (k - 6) / 2] .. ' ' .. table.concat(new, ' ') end
end
local born = {}
for term in string.gmatch(ARGV[4], '%S+') do
  if redis.call('HINCRBY', KEYS[2], term, 1) == 1 then born[#born + 1] = term end
end
return redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[7], '*', 'op', 'add', 'sub', ARGV[1],
                  'matcher', ARGV[2], 'terms', ARGV[4], 'callback_url', ARGV[5], 'query', ARGV[3],
                  'words', table.concat(born, ' '), 'tenant', ARGV[8], 'placements', ARGV[11],
                  'held', table.concat(held, '\\n'), 'stream', ARGV[13])
"""

DELETE = """
if redis.call('HGET', KEYS[1], 'placements') ~= ARGV[2] then return false end
local terms = redis.call('HGET', KEYS[1], 'terms')
local matcher = redis.call('HGET', KEYS[1], 'matcher')
redis.call('DEL', KEYS[1])
redis.call('SREM', KEYS[4], ARGV[1])
local dropped = {}
for k = 6, #KEYS, 2 do
  redis.call('SREM', KEYS[k], ARGV[1])
  local gone = {}
  for term in string.gmatch(terms, '%S+') do
    if redis.call('HINCRBY', KEYS[k + 1], term, -1) <= 0 then
      redis.call('HDEL', KEYS[k + 1], term)
      gone[#gone + 1] = term
    end
  end
  if #gone > 0 then dropped[#dropped + 1] = ARGV[4 + (k - 6) / 2] .. ' ' .. table.concat(gone, ' ') end
end
local died = {}
for term in string.gmatch(terms, '%S+') do
  if redis.call('HINCRBY', KEYS[2], term, -1) <= 0 then
    redis.call('HDEL', KEYS[2], term)
    died[#died + 1] = term
  end
end
return redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[3], '*', 'op', 'del', 'sub', ARGV[1],
                  'matcher', matcher, 'terms', terms, 'words', table.concat(died, ' '),
                  'placements', ARGV[2], 'held', '', 'dropped', table.concat(dropped, '\\n'))
"""

# A batch of keyword subscriptions in one script (one round trip and one event for the batch,
# where one script each cost the router more to pack than Redis to run). KEYS: 1 s(W), 2 events,
# 3 mapping window, then the batch's tenants' sets, then its matchers' (subscription set, H(i))
# pairs, then each subscription's record. ARGV[1]: JSON {w: window, m: events kept, tn: tenants,
# tr: each tenant's limit in this shard, o: the matchers' ordinals, s: the subscriptions, each
# [id, matcher, query, terms, callback_url, created, tenant (1-based), secret, placements,
# stream, matchers (1-based)]}. Answers JSON [event id or "", [per subscription: 1 stored,
# 0 over its tenant's limit, 2 the id exists]], or "-1" when the window moved (nothing stored).
# The event is one entry, op "batch", whose "events" hold each change (records.BATCH_EVENT).
ADD_MANY = """
local batch = cjson.decode(ARGV[1])
if (redis.call('GET', KEYS[3]) or '0 0') ~= batch.w then return '-1' end
local first_matcher = 4 + #batch.tn
local first_record = first_matcher + 2 * #batch.o
local counts = {}
for t = 1, #batch.tn do counts[t] = redis.call('SCARD', KEYS[3 + t]) end
local answers, events = {}, {}
for i, s in ipairs(batch.s) do
  local record, t, terms = KEYS[first_record + i - 1], s[7], s[4]
  if redis.call('EXISTS', record) == 1 then
    answers[i] = 2
  elseif counts[t] >= batch.tr[t] then
    answers[i] = 0
  else
    counts[t] = counts[t] + 1
    redis.call('HSET', record, 'query', s[3], 'terms', terms, 'callback_url', s[5],
               'matcher', s[2], 'created', s[6], 'tenant', batch.tn[t], 'secret', s[8],
               'placements', s[9], 'stream', s[10])
    redis.call('SADD', KEYS[3 + t], s[1])
    local held = {}
    for _, m in ipairs(s[11]) do
      local k = first_matcher + 2 * (m - 1)
      redis.call('SADD', KEYS[k], s[1])
      local new = {}
      for term in string.gmatch(terms, '%S+') do
        if redis.call('HINCRBY', KEYS[k + 1], term, 1) == 1 then new[#new + 1] = term end
      end
      if #new > 0 then held[#held + 1] = batch.o[m] .. ' ' .. table.concat(new, ' ') end
    end
    local born = {}
    for term in string.gmatch(terms, '%S+') do
      if redis.call('HINCRBY', KEYS[1], term, 1) == 1 then born[#born + 1] = term end
    end
    events[#events + 1] = {'add', s[1], s[2], terms, s[5], s[3], table.concat(born, ' '),
                           batch.tn[t], s[9], table.concat(held, '\\n'), '', s[10]}
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

# A batch of keyword records deleted in one script, as DELETE each (a boolean query's later
# alternatives before it). KEYS: 1 s(W), 2 events, then the batch's tenants' sets, then its
# matchers' (subscription set, H(i)) pairs, then each record. ARGV[1]: JSON {m: events kept,
# tn: tenants, o: the matchers' ordinals, s: the records, each [id, placements as read, tenant
# (1-based), matchers (1-based)]}. Answers JSON [event id or "", [per record: 1 deleted, 0 changed since
# it was read (its placements), 2 gone]], its event one "batch" entry as ADD_MANY's.
DELETE_MANY = """
local batch = cjson.decode(ARGV[1])
local first_matcher = 3 + #batch.tn
local first_record = first_matcher + 2 * #batch.o
local answers, events = {}, {}
for i, s in ipairs(batch.s) do
  local record = KEYS[first_record + i - 1]
  local found = redis.call('HMGET', record, 'placements', 'terms', 'matcher')
  if not found[2] then
    answers[i] = 2
  elseif (found[1] or '') ~= s[2] then
    answers[i] = 0
  else
    local terms = found[2]
    redis.call('DEL', record)
    redis.call('SREM', KEYS[2 + s[3]], s[1])
    local dropped = {}
    for _, m in ipairs(s[4]) do
      local k = first_matcher + 2 * (m - 1)
      redis.call('SREM', KEYS[k], s[1])
      local gone = {}
      for term in string.gmatch(terms, '%S+') do
        if redis.call('HINCRBY', KEYS[k + 1], term, -1) <= 0 then
          redis.call('HDEL', KEYS[k + 1], term)
          gone[#gone + 1] = term
        end
      end
      if #gone > 0 then dropped[#dropped + 1] = batch.o[m] .. ' ' .. table.concat(gone, ' ') end
    end
    local died = {}
    for term in string.gmatch(terms, '%S+') do
      if redis.call('HINCRBY', KEYS[1], term, -1) <= 0 then
        redis.call('HDEL', KEYS[1], term)
        died[#died + 1] = term
      end
    end
    events[#events + 1] = {'del', s[1], found[3], terms, '', '', table.concat(died, ' '), '',
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

# Re-placement of a batch of keyword records, as MOVE each. KEYS: 1 events, then the matchers'
# (subscription set, H(i)) pairs, then each record. ARGV[1]: JSON {m: events kept, o: the
# matchers' ordinals, s: the moves, each [id, placements as read, new placements, new matcher,
# matchers left (1-based), matchers joined (1-based)]}. Answers JSON [event id or "", [per
# move: 1 moved, 0 changed since it was read]], its event one "batch" entry as ADD_MANY's.
MOVE_MANY = """
local batch = cjson.decode(ARGV[1])
local answers, events = {}, {}
for i, s in ipairs(batch.s) do
  local record = KEYS[1 + 2 * #batch.o + i]
  if redis.call('HGET', record, 'placements') ~= s[2] then
    answers[i] = 0
  else
    local terms = redis.call('HGET', record, 'terms')
    local held, dropped = {}, {}
    for _, m in ipairs(s[5]) do
      local k = 2 * m
      redis.call('SREM', KEYS[k], s[1])
      local gone = {}
      for term in string.gmatch(terms, '%S+') do
        if redis.call('HINCRBY', KEYS[k + 1], term, -1) <= 0 then
          redis.call('HDEL', KEYS[k + 1], term)
          gone[#gone + 1] = term
        end
      end
      if #gone > 0 then dropped[#dropped + 1] = batch.o[m] .. ' ' .. table.concat(gone, ' ') end
    end
    for _, m in ipairs(s[6]) do
      local k = 2 * m
      redis.call('SADD', KEYS[k], s[1])
      local new = {}
      for term in string.gmatch(terms, '%S+') do
        if redis.call('HINCRBY', KEYS[k + 1], term, 1) == 1 then new[#new + 1] = term end
      end
      if #new > 0 then held[#held + 1] = batch.o[m] .. ' ' .. table.concat(new, ' ') end
    end
    redis.call('HSET', record, 'placements', s[3], 'matcher', s[4])
    local f = redis.call('HMGET', record, 'query', 'callback_url', 'tenant', 'stream')
    events[#events + 1] = {'move', s[1], s[4], terms, f[2] or '', f[1] or '', '', f[3] or '',
                           s[3], table.concat(held, '\\n'), table.concat(dropped, '\\n'),
                           f[4] or ''}
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

# Re-placement (a mapping change). KEYS: 1 record, 2 events, then pairs (subscription set, H(i)):
# first ARGV[5] pairs of matchers the subscription leaves, then those it joins (their ordinals from
# ARGV[7] on, in the same order).
MOVE = """
if redis.call('HGET', KEYS[1], 'placements') ~= ARGV[2] then return false end
local terms = redis.call('HGET', KEYS[1], 'terms')
local leaving = tonumber(ARGV[5])
local held, dropped = {}, {}
for k = 3, #KEYS, 2 do
  local index = (k - 3) / 2
  local changed = {}
  if index < leaving then
    redis.call('SREM', KEYS[k], ARGV[1])
    for term in string.gmatch(terms, '%S+') do
      if redis.call('HINCRBY', KEYS[k + 1], term, -1) <= 0 then
        redis.call('HDEL', KEYS[k + 1], term)
        changed[#changed + 1] = term
      end
    end
    if #changed > 0 then dropped[#dropped + 1] = ARGV[7 + index] .. ' ' .. table.concat(changed, ' ') end
  else
    redis.call('SADD', KEYS[k], ARGV[1])
    for term in string.gmatch(terms, '%S+') do
      if redis.call('HINCRBY', KEYS[k + 1], term, 1) == 1 then changed[#changed + 1] = term end
    end
    if #changed > 0 then held[#held + 1] = ARGV[7 + index] .. ' ' .. table.concat(changed, ' ') end
  end
end
redis.call('HSET', KEYS[1], 'placements', ARGV[3], 'matcher', ARGV[4])
local f = redis.call('HMGET', KEYS[1], 'query', 'callback_url', 'tenant', 'stream')
return redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[6], '*', 'op', 'move', 'sub', ARGV[1],
                  'matcher', ARGV[4], 'terms', terms, 'query', f[1], 'callback_url', f[2],
                  'tenant', f[3], 'stream', f[4] or '', 'placements', ARGV[3], 'words', '',
                  'held', table.concat(held, '\\n'), 'dropped', table.concat(dropped, '\\n'))
"""

# Pattern add. KEYS: 1 record, 2 its matcher's subscription set, 3 its anchor map, 4 pattern loads,
# 5 events, 6 tenant's set, 7 mapping window.
ADD_PATTERN = """
if redis.call('EXISTS', KEYS[1]) == 1 then return false end
if (redis.call('GET', KEYS[7]) or '0 0') ~= ARGV[11] then return -1 end
if redis.call('SCARD', KEYS[6]) >= tonumber(ARGV[9]) then return 0 end
redis.call('HSET', KEYS[1], 'pattern', ARGV[3], 'anchor', ARGV[4], 'callback_url', ARGV[5],
           'matcher', ARGV[2], 'created', ARGV[6], 'terms', '', 'tenant', ARGV[8],
           'secret', ARGV[10], 'stream', ARGV[12])
redis.call('SADD', KEYS[2], ARGV[1])
redis.call('SADD', KEYS[6], ARGV[1])
redis.call('HINCRBY', KEYS[4], ARGV[2], 1)
local born = ''
if redis.call('HINCRBY', KEYS[3], ARGV[4], 1) == 1 then born = ARGV[2] end
return redis.call('XADD', KEYS[5], 'MAXLEN', '~', ARGV[7], '*', 'op', 'add', 'sub', ARGV[1],
                  'matcher', ARGV[2], 'pattern', ARGV[3], 'anchor', ARGV[4], 'terms', '',
                  'callback_url', ARGV[5], 'anchor_joined', born, 'tenant', ARGV[8],
                  'stream', ARGV[12])
"""

# Pattern scripts after the add. KEYS: 1 record, 2 events, 3 pattern loads, 4 tenant's set, then for
# each matcher of the placements (ARGV from 5 on) its subscription set and its anchor map.
DELETE_PATTERN = """
if redis.call('EXISTS', KEYS[1]) == 0 then return false end
if (redis.call('HGET', KEYS[1], 'placements') or '') ~= ARGV[2] then return false end
local anchor = redis.call('HGET', KEYS[1], 'anchor')
local f = redis.call('HMGET', KEYS[1], 'pattern', 'matcher')
redis.call('DEL', KEYS[1])
redis.call('SREM', KEYS[4], ARGV[1])
local left = {}
for k = 5, #KEYS, 2 do
  local matcher = ARGV[4 + (k - 5) / 2]
  redis.call('SREM', KEYS[k], ARGV[1])
  if redis.call('HINCRBY', KEYS[k + 1], anchor, -1) <= 0 then
    redis.call('HDEL', KEYS[k + 1], anchor)
    left[#left + 1] = matcher
  end
  if redis.call('HINCRBY', KEYS[3], matcher, -1) <= 0 then redis.call('HDEL', KEYS[3], matcher) end
end
return redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[3], '*', 'op', 'del', 'sub', ARGV[1],
                  'matcher', f[2], 'pattern', f[1], 'anchor', anchor, 'terms', '',
                  'placements', ARGV[2], 'anchor_left', table.concat(left, ' '))
"""

# Re-placement of a pattern (the cluster's matchers change). KEYS as for the delete, but the
# matchers are first ARGV[5] it leaves, then those it joins (ids from ARGV[7] on).
MOVE_PATTERN = """
if redis.call('EXISTS', KEYS[1]) == 0 then return false end
if (redis.call('HGET', KEYS[1], 'placements') or '') ~= ARGV[2] then return false end
local anchor = redis.call('HGET', KEYS[1], 'anchor')
local leaving = tonumber(ARGV[5])
local joined, left = {}, {}
for k = 5, #KEYS, 2 do
  local index = (k - 5) / 2
  local matcher = ARGV[7 + index]
  if index < leaving then
    redis.call('SREM', KEYS[k], ARGV[1])
    if redis.call('HINCRBY', KEYS[k + 1], anchor, -1) <= 0 then
      redis.call('HDEL', KEYS[k + 1], anchor)
      left[#left + 1] = matcher
    end
    if redis.call('HINCRBY', KEYS[3], matcher, -1) <= 0 then redis.call('HDEL', KEYS[3], matcher) end
  else
    redis.call('SADD', KEYS[k], ARGV[1])
    if redis.call('HINCRBY', KEYS[k + 1], anchor, 1) == 1 then joined[#joined + 1] = matcher end
    redis.call('HINCRBY', KEYS[3], matcher, 1)
  end
end
redis.call('HSET', KEYS[1], 'placements', ARGV[3], 'matcher', ARGV[4])
local f = redis.call('HMGET', KEYS[1], 'pattern', 'callback_url', 'tenant', 'stream')
return redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[6], '*', 'op', 'move', 'sub', ARGV[1],
                  'matcher', ARGV[4], 'pattern', f[1], 'anchor', anchor, 'terms', '',
                  'callback_url', f[2], 'tenant', f[3], 'stream', f[4] or '', 'placements', ARGV[3],
                  'anchor_joined', table.concat(joined, ' '), 'anchor_left', table.concat(left, ' '))
"""

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

# KEYS: the record, the secrets epoch (dispatchers keep secrets until it moves).
ROTATE = """
local old = redis.call('HGET', KEYS[1], 'secret')
if not old then return false end
redis.call('HSET', KEYS[1], 'secret', ARGV[1], 'previous_secret', old, 'previous_until', ARGV[2])
redis.call('INCR', KEYS[2])
return 1
"""


# Fields of many subscriptions' records in one reply (KEYS: their hashes; ARGV: the fields): a
# JSON list with, for each record, its values ("" for a field, or a record, not there). A
# restarting matcher reads a million in pages this way: a command and a parsed reply apiece cost
# the client several times what Redis spends. The keys share a slot only on one server.
RECORDS = """
local out = {}
for i, key in ipairs(KEYS) do
  local values = redis.call('HMGET', key, unpack(ARGV))
  for j = 1, #ARGV do values[j] = values[j] or '' end
  out[i] = values
end
return cjson.encode(out)
"""
