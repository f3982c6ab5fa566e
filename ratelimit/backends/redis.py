"""Redis backend: processes on many hosts share a limiter through one Redis server.

Each acquisition is one Lua script, which Redis runs atomically: it reads the server's ``TIME``,
prunes the sorted set, decides exactly as :func:`ratelimit.rules.decide` does, and records the
grant with that reading as its score. Clients' clocks are never read, and nothing is recorded on
refusal. Keys carry a hash tag, so a cluster keeps one limiter's keys on one slot, and expire
once idle, so storage stays bounded.
"""

from __future__ import annotations

import math
import uuid

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

# KEYS: log (zset: score = stamp, member = "grant_id requests tokens"), pause (string: until)
# ARGV: now or "", "1" to record, grant id, requests, tokens, ttl ms, then (limit, window, unit) triples
_ACQUIRE = _NOW + """
local record = ARGV[2] == "1"
local charge = {tonumber(ARGV[4]), tonumber(ARGV[5])}
local rules = {}
local longest = 0
for i = 7, #ARGV, 3 do
  local rule = {tonumber(ARGV[i]), tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2])}
  rules[#rules + 1] = rule
  if rule[2] > longest then longest = rule[2] end
end
local raw = redis.call("ZRANGE", KEYS[1], 0, -1, "WITHSCORES")
local entries = {}
local expired = 0
for i = 1, #raw, 2 do
  local stamp = tonumber(raw[i + 1])
  if stamp + longest <= now then
    expired = expired + 1
  else
    local r, t = string.match(raw[i], "^%S+ (%d+) (%d+)$")
    entries[#entries + 1] = {stamp, tonumber(r), tonumber(t)}
  end
end
if expired > 0 then redis.call("ZREMRANGEBYRANK", KEYS[1], 0, expired - 1) end
local retry_at = now
local never = false
local result = {0, "", ""}
for _, rule in ipairs(rules) do
  local limit, window, unit = rule[1], rule[2], rule[3]
  local used = 0
  local live = {}
  for _, e in ipairs(entries) do
    if e[1] + window > now then
      used = used + e[1 + unit]
      live[#live + 1] = e
    end
  end
  result[#result + 1] = used
  local amount = charge[unit]
  if amount > limit then
    never = true
  else
    local excess = used + amount - limit
    if excess > 0 then
      local freed = 0
      for _, e in ipairs(live) do
        freed = freed + e[1 + unit]
        if freed >= excess then
          if e[1] + window > retry_at then retry_at = e[1] + window end
          break
        end
      end
    end
  end
end
local paused = redis.call("GET", KEYS[2])
if paused then
  paused = tonumber(paused)
  if paused > retry_at then retry_at = paused end
end
local granted = (not never) and retry_at <= now
if granted and record then
  redis.call("ZADD", KEYS[1], string.format("%.17g", now), ARGV[3] .. " " .. ARGV[4] .. " " .. ARGV[5])
  redis.call("PEXPIRE", KEYS[1], ARGV[6])
end
result[1] = granted and 1 or 0
result[2] = string.format("%.17g", now)
result[3] = never and "inf" or string.format("%.17g", retry_at)
return result
"""

# KEYS: pause; ARGV: now or "", seconds, ttl ms
_PAUSE = _NOW + """
local till = now + tonumber(ARGV[2])
local current = redis.call("GET", KEYS[1])
if (not current) or tonumber(current) < till then
  redis.call("SET", KEYS[1], string.format("%.17g", till), "PX", ARGV[3])
end
return string.format("%.17g", till)
"""

# KEYS: log; ARGV: grant id, tokens
_CORRECT = """
local raw = redis.call("ZRANGE", KEYS[1], 0, -1, "WITHSCORES")
for i = 1, #raw, 2 do
  local id, r = string.match(raw[i], "^(%S+) (%d+) %d+$")
  if id == ARGV[1] then
    redis.call("ZREM", KEYS[1], raw[i])
    redis.call("ZADD", KEYS[1], raw[i + 1], id .. " " .. r .. " " .. ARGV[2])
    return 1
  end
end
return 0
"""

_UNIT = {"requests": 1, "tokens": 2}


class RedisBackend(Backend):
    """Sliding-window logs in Redis sorted sets, stamped by the server's ``TIME``.

    Args:
        url: ``redis://host:port/db``.
        clock: stamp with this clock instead of the server's (virtual-clock tests only).
        timeout: seconds before an unreachable or silent server fails closed.
        prefix: the key prefix.
    """

    name = "redis"
    blocking = True

    def __init__(
        self,
        url: str,
        *,
        clock: Clock | None = None,
        timeout: float = 5.0,
        prefix: str = "sqlgate:ratelimit",
    ) -> None:
        self.url = url
        self._clock = clock
        self.prefix = prefix
        self._client = redis_py.Redis.from_url(url, socket_timeout=timeout, socket_connect_timeout=timeout)
        self._acquire = self._client.register_script(_ACQUIRE)
        self._pause = self._client.register_script(_PAUSE)
        self._correct = self._client.register_script(_CORRECT)

    def _keys(self, key: str) -> list[str]:
        return [f"{self.prefix}:{{{key}}}:log", f"{self.prefix}:{{{key}}}:pause"]

    def _now_arg(self, clock: Clock | None) -> str:
        return "" if self._clock is None else repr(float(self._clock()))

    def _call(self, script, keys, args):  # type: ignore[no-untyped-def]
        try:
            return script(keys=keys, args=args)
        except redis_py.RedisError as exc:
            raise BackendUnavailable(self.name, f"{type(exc).__name__}: {exc}") from exc

    def setup(self) -> None:
        self._call(lambda keys, args: self._client.ping(), [], [])

    def _decide(self, key: str, rules: Limits, charge: Charge, clock: Clock | None, record: bool) -> Verdict:
        grant_id = uuid.uuid4().hex if record else "-"
        ttl_ms = math.ceil(rules.longest_window * 1000) + 1000
        args: list[object] = [self._now_arg(clock), "1" if record else "0", grant_id, charge.requests, charge.tokens, ttl_ms]
        for rule in rules:
            args += [rule.limit, repr(rule.window), _UNIT[rule.unit]]
        reply = self._call(self._acquire, self._keys(key), args)
        granted, now, retry_at = bool(reply[0]), float(reply[1]), float(reply[2])
        used = tuple(int(u) for u in reply[3:])
        if granted:
            return Verdict(True, now, 0.0, grant_id if record else None, used)
        return Verdict(False, now, math.inf if math.isinf(retry_at) else wait_until(now, retry_at), None, used)

    def acquire(self, key: str, rules: Limits, charge: Charge, clock: Clock | None) -> Verdict:
        return self._decide(key, rules, charge, clock, record=True)

    def peek(self, key: str, rules: Limits, charge: Charge, clock: Clock | None) -> Verdict:
        return self._decide(key, rules, charge, clock, record=False)

    def pause(self, key: str, seconds: float, clock: Clock | None) -> None:
        ttl_ms = math.ceil(seconds * 1000) + 1000
        self._call(self._pause, self._keys(key)[1:], [self._now_arg(clock), repr(float(seconds)), ttl_ms])

    def correct(self, key: str, grant_id: str, tokens: int) -> bool:
        return bool(self._call(self._correct, self._keys(key)[:1], [grant_id, tokens]))

    def clear(self, key: str) -> None:
        self._call(lambda keys, args: self._client.delete(*keys), self._keys(key), [])

    def stored_entries(self, key: str) -> int:
        return int(self._call(lambda keys, args: self._client.zcard(keys[0]), self._keys(key), []))

    def close(self) -> None:
        self._client.close()
