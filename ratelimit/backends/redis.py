"""Redis backend: processes on many hosts share a limiter through one Redis server.

Each acquisition is one Lua script, which Redis runs atomically: it reads the server's ``TIME``,
prunes one sorted set per window, decides exactly as :func:`ratelimit.rules.decide` does (from
running sums kept beside the sets), and records the grant with that reading as its score.
Clients' clocks are never read, and nothing is recorded on refusal. Keys carry a hash tag, so a
cluster keeps one limiter's keys on one slot, and expire once idle, so storage stays bounded.

A restart that loses the data must not reset the window. Each key has a marker holding when
the server started, refreshed by every call and lost with the data. When the script finds no
marker it asks the client for the server's uptime (``INFO server``) and writes it: grants made
before the server started stop counting at ``start + window`` at the latest, so until then the
key is treated as full, and a restart never lets more than the limit into any window. A marker
that expired because the key was idle, on a server up for longer than the window, costs one
extra round trip and no wait.
What the server must keep: either nothing across a restart (no persistence) or everything
(``appendonly yes`` with ``appendfsync always``). A restore from an older snapshot (RDB) brings
back a marker with stale grants, which this check cannot tell from the truth. Nor may the
server evict (``maxmemory-policy noeviction``, the default): these keys carry expiry times, so
a ``volatile-*`` policy could drop grants that still count.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Callable
from typing import Any

import redis as redis_py

from ratelimit.backends.base import Backend, Clock
from ratelimit.errors import BackendUnavailable
from ratelimit.rules import Charge, Limits, Verdict, wait_until

_NOW = """
local now
if ARGV[1] == "" then
  local t = redis.call("TIME")
  now = tonumber(t[1]) + tonumber(t[2]) / 1000000
else
  now = tonumber(ARGV[1])
end
"""

# Storage, all under one hash tag:
#   grants  hash   grant_id -> "stamp requests tokens"   (every grant still counting somewhere)
#   w:<W>   zset   score = stamp, member = grant_id      (grants still counting in window W)
#   sums    hash   "<W>:1" / "<W>:2" -> requests / tokens in window W
#   pause   string until
# Every grant enters each window's set once and leaves it once, so a decision costs O(log n)
# plus the grants that expire; a refusal walks only the oldest grants it must wait for.

# KEYS: grants, sums, pause, marker, then one zset per distinct window (longest first)
# ARGV: now or "", "1" to record, grant id, requests, tokens, ttl ms, server uptime or "",
#       then the distinct windows (same order as their KEYS), then (limit, window index, unit) triples
# Returns {-1} without deciding when the marker is missing and no uptime was given.
_ACQUIRE = (
    _NOW
    + """
local record = ARGV[2] == "1"
local charge = {tonumber(ARGV[4]), tonumber(ARGV[5])}
local nwin = tonumber(ARGV[8])
local windows = {}
for i = 1, nwin do windows[i] = tonumber(ARGV[8 + i]) end
local rules = {}
for i = 9 + nwin, #ARGV, 3 do
  rules[#rules + 1] = {tonumber(ARGV[i]), tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2])}
end
-- the marker holds when the server started; data may have been lost with a restart then,
-- so nothing is admitted before start + the longest window
local started = redis.call("GET", KEYS[4])
if started then
  started = tonumber(started)
else
  if ARGV[7] == "" then return {-1} end
  started = now - tonumber(ARGV[7]) + 1  -- uptime counts whole seconds: round up
  redis.call("SET", KEYS[4], string.format("%.17g", started))
end
redis.call("PEXPIRE", KEYS[4], ARGV[6])
local held_until = started + windows[1]
local function amounts(id)
  local data = redis.call("HGET", KEYS[1], id)
  if not data then return nil end
  local stamp, r, t = string.match(data, "^(%S+) (%d+) (%d+)$")
  return tonumber(stamp), tonumber(r), tonumber(t)
end
-- drop what stopped counting, shortest window first, so a grant's amounts are still in
-- the grants hash when the longest window finally lets it go (exact test: stamp + window <= now)
for w = nwin, 1, -1 do
  local window, zkey = windows[w], KEYS[4 + w]
  local cut = now - window + 1
  while true do
    local head = redis.call("ZRANGEBYSCORE", zkey, "-inf", string.format("%.17g", cut), "WITHSCORES", "LIMIT", 0, 64)
    local removed = 0
    for i = 1, #head, 2 do
      local stamp = tonumber(head[i + 1])
      if stamp + window > now then break end
      local _, r, t = amounts(head[i])
      redis.call("ZREM", zkey, head[i])
      if r then
        redis.call("HINCRBY", KEYS[2], window .. ":1", string.format("%d", -r))
        redis.call("HINCRBY", KEYS[2], window .. ":2", string.format("%d", -t))
      end
      if w == 1 then redis.call("HDEL", KEYS[1], head[i]) end
      removed = removed + 1
    end
    if removed < 64 then break end
  end
end
local retry_at = now
local never = false
local result = {0, "", ""}
for _, rule in ipairs(rules) do
  local limit, w, unit = rule[1], rule[2], rule[3]
  local window = windows[w]
  local used = tonumber(redis.call("HGET", KEYS[2], window .. ":" .. unit) or "0")
  result[#result + 1] = used
  local amount = charge[unit]
  if amount > limit then
    never = true
  elseif used + amount > limit then
    local excess, freed, offset = used + amount - limit, 0, 0
    while freed < excess do
      local batch = redis.call("ZRANGE", KEYS[4 + w], offset, offset + 15, "WITHSCORES")
      if #batch == 0 then break end
      for i = 1, #batch, 2 do
        local _, r, t = amounts(batch[i])
        freed = freed + ((unit == 1) and (r or 0) or (t or 0))
        if freed >= excess then
          local expiry = tonumber(batch[i + 1]) + window
          if expiry > retry_at then retry_at = expiry end
          break
        end
      end
      offset = offset + 16
    end
  end
end
local paused = redis.call("GET", KEYS[3])
if paused then
  paused = tonumber(paused)
  if paused > retry_at then retry_at = paused end
end
if held_until > now and held_until > retry_at then retry_at = held_until end
local granted = (not never) and retry_at <= now
if granted and record then
  local stamp = string.format("%.17g", now)
  redis.call("HSET", KEYS[1], ARGV[3], stamp .. " " .. ARGV[4] .. " " .. ARGV[5])
  for w = 1, nwin do
    redis.call("ZADD", KEYS[4 + w], stamp, ARGV[3])
    redis.call("HINCRBY", KEYS[2], windows[w] .. ":1", ARGV[4])
    redis.call("HINCRBY", KEYS[2], windows[w] .. ":2", ARGV[5])
    redis.call("PEXPIRE", KEYS[4 + w], ARGV[6])
  end
  redis.call("PEXPIRE", KEYS[1], ARGV[6])
  redis.call("PEXPIRE", KEYS[2], ARGV[6])
end
result[1] = granted and 1 or 0
result[2] = string.format("%.17g", now)
result[3] = never and "inf" or string.format("%.17g", retry_at)
return result
"""
)

# KEYS: pause; ARGV: now or "", seconds, ttl ms
_PAUSE = (
    _NOW
    + """
local till = now + tonumber(ARGV[2])
local current = redis.call("GET", KEYS[1])
if (not current) or tonumber(current) < till then
  redis.call("SET", KEYS[1], string.format("%.17g", till), "PX", ARGV[3])
end
return string.format("%.17g", till)
"""
)

# KEYS: grants, sums, then one zset per window; ARGV: grant id, tokens, then the windows
_CORRECT = """
local data = redis.call("HGET", KEYS[1], ARGV[1])
if not data then return 0 end
local stamp, r, t = string.match(data, "^(%S+) (%d+) (%d+)$")
local delta = tonumber(ARGV[2]) - tonumber(t)
redis.call("HSET", KEYS[1], ARGV[1], stamp .. " " .. r .. " " .. ARGV[2])
for i = 3, #ARGV do
  if redis.call("ZSCORE", KEYS[i], ARGV[1]) then
    redis.call("HINCRBY", KEYS[2], tonumber(ARGV[i]) .. ":2", string.format("%d", delta))
  end
end
return 1
"""

# KEYS: grants, sums, then one zset per window; ARGV: grant id, then the windows
_REFUND = """
local data = redis.call("HGET", KEYS[1], ARGV[1])
if not data then return 0 end
local _, r, t = string.match(data, "^(%S+) (%d+) (%d+)$")
for i = 2, #ARGV do
  if redis.call("ZREM", KEYS[i + 1], ARGV[1]) == 1 then
    redis.call("HINCRBY", KEYS[2], tonumber(ARGV[i]) .. ":1", string.format("%d", -tonumber(r)))
    redis.call("HINCRBY", KEYS[2], tonumber(ARGV[i]) .. ":2", string.format("%d", -tonumber(t)))
  end
end
redis.call("HDEL", KEYS[1], ARGV[1])
return 1
"""

_UNIT = {"requests": 1, "tokens": 2}


class RedisBackend(Backend):
    """Sliding-window logs in Redis sorted sets, stamped by the server's ``TIME``.

    Args:
        url: ``redis://host:port/db``.
        clock: stamp with this clock instead of the server's (virtual-clock tests only).
        timeout: seconds before an unreachable or silent server fails closed (per round trip:
            a call makes one, or three when the restart marker was missing). Default 2.
        prefix: the key prefix.
    """

    name = "redis"
    blocking = True

    def __init__(
        self,
        url: str,
        *,
        clock: Clock | None = None,
        timeout: float = 2.0,
        prefix: str = "sqlgate:ratelimit",
    ) -> None:
        self.url = url
        self._clock = clock
        self.prefix = prefix
        self._client = redis_py.Redis.from_url(
            url, socket_timeout=timeout, socket_connect_timeout=timeout
        )
        self._acquire = self._client.register_script(_ACQUIRE)
        self._pause = self._client.register_script(_PAUSE)
        self._correct = self._client.register_script(_CORRECT)
        self._refund = self._client.register_script(_REFUND)

    def _keys(self, key: str) -> list[str]:
        base = f"{self.prefix}:{{{key}}}"
        return [f"{base}:grants", f"{base}:sums", f"{base}:pause"]

    def _marker_key(self, key: str) -> str:
        return f"{self.prefix}:{{{key}}}:alive"

    def _uptime(self) -> int:
        """Seconds the server has been up (``INFO server``)."""
        info = self._call(lambda keys, args: self._client.info("server"), [], [])
        return int(info["uptime_in_seconds"])

    @staticmethod
    def _windows(rules: Limits) -> list[float]:
        return sorted({rule.window for rule in rules}, reverse=True)

    def _window_key(self, key: str, window: float) -> str:
        return f"{self.prefix}:{{{key}}}:w:{window!r}"

    def _now_arg(self, clock: Clock | None) -> str:
        return "" if self._clock is None else repr(float(self._clock()))

    def _call(self, script: Callable[..., Any], keys: list[str], args: list[Any]) -> Any:
        try:
            return script(keys=keys, args=args)
        except redis_py.RedisError as exc:
            raise BackendUnavailable(self.name, f"{type(exc).__name__}: {exc}") from exc

    def setup(self) -> None:
        self._call(lambda keys, args: self._client.ping(), [], [])

    def _decide(
        self, key: str, rules: Limits, charge: Charge, clock: Clock | None, record: bool
    ) -> Verdict:
        grant_id = uuid.uuid4().hex if record else "-"
        ttl_ms = math.ceil(rules.longest_window * 1000) + 1000
        windows = self._windows(rules)
        keys = (
            self._keys(key) + [self._marker_key(key)] + [self._window_key(key, w) for w in windows]
        )
        # Lua reads numbers through tonumber(); repr() keeps every bit of a float
        args: list[object] = [
            self._now_arg(clock),
            "1" if record else "0",
            grant_id,
            charge.requests,
            charge.tokens,
            ttl_ms,
            "",
        ]
        args += [len(windows)] + [repr(w) for w in windows]
        for rule in rules:
            args += [rule.limit, windows.index(rule.window) + 1, _UNIT[rule.unit]]
        reply = self._call(self._acquire, keys, args)
        if int(reply[0]) == -1:  # no marker: the script needs the server's uptime
            args[6] = self._uptime()
            reply = self._call(self._acquire, keys, args)
            if int(reply[0]) == -1:
                raise BackendUnavailable(self.name, "the restart marker could not be set")
        granted, now, retry_at = bool(reply[0]), float(reply[1]), float(reply[2])
        used = tuple(int(u) for u in reply[3:])
        if granted:
            return Verdict(True, now, 0.0, grant_id if record else None, used)
        return Verdict(
            False, now, math.inf if math.isinf(retry_at) else wait_until(now, retry_at), None, used
        )

    def acquire(self, key: str, rules: Limits, charge: Charge, clock: Clock | None) -> Verdict:
        return self._decide(key, rules, charge, clock, record=True)

    def peek(self, key: str, rules: Limits, charge: Charge, clock: Clock | None) -> Verdict:
        return self._decide(key, rules, charge, clock, record=False)

    def pause(self, key: str, seconds: float, clock: Clock | None) -> None:
        ttl_ms = math.ceil(seconds * 1000) + 1000
        self._call(
            self._pause, self._keys(key)[2:], [self._now_arg(clock), repr(float(seconds)), ttl_ms]
        )

    def correct(self, key: str, grant_id: str, tokens: int, rules: Limits) -> bool:
        windows = self._windows(rules)
        keys = self._keys(key)[:2] + [self._window_key(key, w) for w in windows]
        return bool(
            self._call(self._correct, keys, [grant_id, tokens] + [repr(w) for w in windows])
        )

    def refund(self, key: str, grant_id: str, rules: Limits) -> bool:
        windows = self._windows(rules)
        keys = self._keys(key)[:2] + [self._window_key(key, w) for w in windows]
        return bool(self._call(self._refund, keys, [grant_id] + [repr(w) for w in windows]))

    def clear(self, key: str) -> None:
        def delete(keys: list[str], args: list[object]) -> None:
            windows = list(
                self._client.scan_iter(match=self._window_key(key, 0.0)[: -len("0.0")] + "*")
            )
            self._client.delete(*keys, *windows)

        self._call(delete, self._keys(key) + [self._marker_key(key)], [])

    def stored_entries(self, key: str) -> int:
        return int(self._call(lambda keys, args: self._client.hlen(keys[0]), self._keys(key), []))

    def close(self) -> None:
        self._client.close()
