// Package gate is the flash-sale gate in Redis (the seed's §六.2–3): per armed SKU a counter
// of what may still be admitted, taken by a Lua script before an order is created, so that
// the buyers of a sold-out SKU are turned away without a database row or an event.
//
// The gate is an admission filter, never the authority. The database lock still decides
// every order that passes; a gate that admits too many costs only rejected locks, one that
// admits too few (有货卖不出) is found and repaired by stock's gate job from the database.
// Every call has a short timeout and a circuit breaker: when Redis is slow or down, Take
// answers Bypassed and the order goes the database path as if no SKU were armed.
//
// Keys, per SKU s: "sf:gate:{s}" (hash: remaining, armed_at) and "sf:gate:{s}:held" (hash:
// order id → "qty:taken_at_ms", or "r:qty:…" once given back); per order o: "sf:gate:o:o"
// (the SKUs it took). The scripts touch several SKUs' keys at once, so the gate needs one
// Redis (a primary with replicas or Sentinel), not Redis Cluster.
package gate

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/sony/gobreaker/v2"
)

// Config is the gate's part of a service's configuration.
type Config struct {
	// RedisURL is the Redis of the gate (redis://host:port/db); empty: no gate, every order
	// takes the database path.
	RedisURL string `env:"REDIS_URL"`
	// Timeout bounds every gate call to Redis; past it the order goes the database path.
	// Redis answers in well under a millisecond; what a storm delays is the order process
	// itself (hundreds of requests in flight on a few cores): at 50 ms a 2-core machine sent
	// 2-5 % of a storm's losers to the database, at 200 ms none (docs/performance.md). A dead
	// Redis costs this only until the breaker opens (New).
	Timeout time.Duration `env:"GATE_TIMEOUT" envDefault:"200ms"`
}

// Validate reports a setting that cannot work.
func (c Config) Validate() error {
	if c.RedisURL != "" {
		if _, err := redis.ParseURL(c.RedisURL); err != nil {
			return fmt.Errorf("REDIS_URL: %w", err)
		}
	}
	if c.Timeout < time.Millisecond || c.Timeout > 5*time.Second {
		return fmt.Errorf("GATE_TIMEOUT %s must be between 1ms and 5s", c.Timeout)
	}
	return nil
}

// ErrUnavailable: Redis did not answer in time, or the breaker is open. Take never returns it
// (it answers Bypassed); the other calls do, and their callers retry.
var ErrUnavailable = errors.New("gate unavailable")

// Verdict is Take's answer.
type Verdict int

// Verdicts. Open and Bypassed both mean "go the database path": Open because none of the
// order's SKUs is armed, Bypassed because Redis could not be asked.
const (
	Open Verdict = iota
	Admitted
	SoldOut
	Bypassed
)

func (v Verdict) String() string {
	return [...]string{"open", "admitted", "sold_out", "bypassed"}[v]
}

// Line is one SKU and quantity of an order.
type Line struct {
	SKU string
	Qty int64
}

// Gate is the Redis gate. A nil *Gate is a gate that is never armed.
type Gate struct {
	rdb     redis.UniversalClient
	timeout time.Duration
	breaker *gobreaker.CircuitBreaker[any]
	now     func() time.Time
	unarmed unarmedSKUs
}

// UnarmedFor is how long Take (and TakeLocked) believe a SKU Take found unarmed without asking
// Redis again: an order of SKUs none of which is armed (every order outside a sale) then costs
// no Redis round trip, where it cost two (Take and TakeLocked, an eighth of the order
// service's CPU at 600 orders/s, docs/performance.md). The price: a SKU armed by another
// process is gated by this one up to UnarmedFor later; the orders of that second take the
// database path, which decides them as it decides every order (TakeLocked says what the
// gate's count may miss meanwhile). Arm through this Gate forgets at once.
const UnarmedFor = time.Second

// unarmedSKUs remembers the SKUs Take found unarmed, each until when.
type unarmedSKUs struct {
	mu    sync.Mutex
	until map[string]time.Time
	swept time.Time // when expired entries were last dropped
}

// all reports whether every line's SKU is believed unarmed at now.
func (u *unarmedSKUs) all(lines []Line, now time.Time) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, l := range lines {
		if until, ok := u.until[l.SKU]; !ok || !now.Before(until) {
			return false
		}
	}
	return len(lines) > 0
}

// remember believes lines' SKUs unarmed until now+UnarmedFor, and drops the entries that
// expired (at most once per UnarmedFor, so a sale over many SKUs does not sweep per call).
func (u *unarmedSKUs) remember(lines []Line, now time.Time) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.until == nil {
		u.until = map[string]time.Time{}
	}
	if now.Sub(u.swept) >= UnarmedFor {
		for sku, until := range u.until {
			if !now.Before(until) {
				delete(u.until, sku)
			}
		}
		u.swept = now
	}
	for _, l := range lines {
		u.until[l.SKU] = now.Add(UnarmedFor)
	}
}

// forget drops what is remembered of sku.
func (u *unarmedSKUs) forget(sku string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	delete(u.until, sku)
}

// New returns the gate of cfg, or nil when cfg has no Redis.
func New(cfg Config) (*Gate, error) {
	if cfg.RedisURL == "" {
		return nil, nil
	}
	opt, err := redis.ParseURL(cfg.RedisURL)
	if err != nil {
		return nil, fmt.Errorf("gate: %w", err)
	}
	// Fail fast: a gate that waits is worse than no gate.
	opt.DialTimeout, opt.ReadTimeout, opt.WriteTimeout = cfg.Timeout, cfg.Timeout, cfg.Timeout
	opt.PoolTimeout, opt.MaxRetries = cfg.Timeout, -1
	// A storm puts up to thousands of buyers in flight at once, each with its own call;
	// waiting for a pooled connection is what made them miss the timeout: with 128
	// connections 5,344 of a 50,000-buyer storm's calls took the database path, with 2,048
	// 529 (docs/performance.md). Connections are opened only as calls need them, so the cap
	// costs nothing at rest; ?pool_size= in REDIS_URL sets another.
	opt.PoolSize = max(opt.PoolSize, 2048)
	return NewWithClient(redis.NewClient(opt), cfg.Timeout), nil
}

// NewWithClient returns the gate on rdb, each call bounded by timeout.
func NewWithClient(rdb redis.UniversalClient, timeout time.Duration) *Gate {
	return &Gate{
		rdb: rdb, timeout: timeout, now: time.Now,
		// A dead Redis opens the breaker for two seconds (buyers then cost nothing to wait
		// for it, and one probe tells when it is back): five failures in a row while calls
		// are few, or half of the calls of the last second once there are 20. A Redis that
		// answers most calls late — a saturated process, not a dead server — does not: the
		// calls past the timeout take the database path one by one, the others are gated.
		breaker: gobreaker.NewCircuitBreaker[any](gobreaker.Settings{
			Name:     "gate",
			Interval: time.Second,
			Timeout:  2 * time.Second,
			ReadyToTrip: func(c gobreaker.Counts) bool {
				if c.Requests < 20 {
					return c.ConsecutiveFailures >= 5
				}
				return c.TotalFailures*2 >= c.Requests
			},
		}),
	}
}

// Close closes the Redis client.
func (g *Gate) Close() error {
	if g == nil {
		return nil
	}
	return g.rdb.Close()
}

// Ping reports whether Redis answers.
func (g *Gate) Ping(ctx context.Context) error {
	_, err := g.do(ctx, func(ctx context.Context) (any, error) { return g.rdb.Ping(ctx).Result() })
	return err
}

// do runs call through the breaker with the gate's timeout; a Redis failure is ErrUnavailable.
func (g *Gate) do(ctx context.Context, call func(context.Context) (any, error)) (any, error) {
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	v, err := g.breaker.Execute(func() (any, error) {
		v, err := call(ctx)
		if errors.Is(err, redis.Nil) {
			return nil, nil
		}
		return v, err
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return v, nil
}

func gateKey(sku string) string { return "sf:gate:{" + sku + "}" }
func heldKey(sku string) string { return "sf:gate:{" + sku + "}:held" }
func orderKey(id string) string { return "sf:gate:o:" + id }
func (g *Gate) ms() string      { return strconv.FormatInt(g.now().UnixMilli(), 10) }
func skuOfKey(key string) string {
	return strings.TrimSuffix(strings.TrimPrefix(key, "sf:gate:{"), "}")
}

// take: KEYS[1] the order's key, then per line its gate and held keys; ARGV[1] the order id,
// ARGV[2] now (ms), then per line its quantity and its SKU. All or nothing over the order's
// armed SKUs; a second take of one order changes nothing and answers admitted.
var take = redis.NewScript(`
local order, now = ARGV[1], ARGV[2]
local n = (#KEYS - 1) / 2
local armed = {}
for i = 1, n do
  local rem = redis.call('HGET', KEYS[2*i], 'remaining')
  if rem then
    if redis.call('HEXISTS', KEYS[2*i+1], order) == 1 then return {'admitted', 0} end
    if tonumber(rem) < tonumber(ARGV[1+2*i]) then return {'sold_out', i} end
    armed[#armed+1] = i
  end
end
if #armed == 0 then return {'open', 0} end
local skus = {}
for _, i in ipairs(armed) do
  redis.call('HINCRBY', KEYS[2*i], 'remaining', -tonumber(ARGV[1+2*i]))
  redis.call('HSET', KEYS[2*i+1], order, ARGV[1+2*i] .. ':' .. now)
  skus[#skus+1] = ARGV[2+2*i]
end
redis.call('SET', KEYS[1], table.concat(skus, '\n'), 'EX', 604800)
return {'admitted', 0}
`)

// Take asks the gate for order id's lines. Admitted: every armed SKU of the order had enough
// left and gave it (SKUs not armed are not counted); SoldOut: an armed SKU, named by sku, has
// less than its line asks, and nothing was taken; Open: no SKU of the order is armed;
// Bypassed: Redis could not be asked. Taking again for the same order id takes nothing more.
// An order whose SKUs were all found unarmed within UnarmedFor is answered Open without Redis.
func (g *Gate) Take(ctx context.Context, orderID string, lines []Line) (v Verdict, sku string) {
	if g == nil {
		return Open, ""
	}
	if g.unarmed.all(lines, g.now()) {
		return Open, ""
	}
	keys, args := g.orderArgs(orderID, lines)
	res, err := g.do(ctx, func(ctx context.Context) (any, error) { return take.Run(ctx, g.rdb, keys, args...).Slice() })
	if err != nil {
		return Bypassed, ""
	}
	out, _ := res.([]any)
	if len(out) != 2 {
		return Bypassed, ""
	}
	switch out[0] {
	case "admitted":
		return Admitted, ""
	case "sold_out":
		i, _ := out[1].(int64)
		if i >= 1 && int(i) <= len(lines) {
			sku = lines[i-1].SKU
		}
		return SoldOut, sku
	case "open":
		g.unarmed.remember(lines, g.now())
	}
	return Open, ""
}

// takeLocked: the keys and arguments of take. For an order the gate does not know (Take
// answered Bypassed, and the database locked it), each armed SKU gives up its line's
// quantity, below zero if need be: the gate then holds what the database holds, and a later
// release gives it back. An order the gate knows — taken, or counted here before — changes
// nothing. It returns the units taken.
var takeLocked = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
local order, now = ARGV[1], ARGV[2]
local n, taken, skus = (#KEYS - 1) / 2, 0, {}
for i = 1, n do
  if redis.call('EXISTS', KEYS[2*i]) == 1 and redis.call('HEXISTS', KEYS[2*i+1], order) == 0 then
    local q = tonumber(ARGV[1+2*i])
    redis.call('HINCRBY', KEYS[2*i], 'remaining', -q)
    redis.call('HSET', KEYS[2*i+1], order, q .. ':' .. now)
    skus[#skus+1] = ARGV[2+2*i]
    taken = taken + q
  end
end
if #skus > 0 then redis.call('SET', KEYS[1], table.concat(skus, '\n'), 'EX', 604800) end
return taken
`)

// TakeLocked counts against the gate an order the database locked although the gate did not
// admit it (Redis did not answer its Take in time): without it the gate stays above zero
// while the database is sold out, and every rejected buyer it lets through gives its unit
// back to the next. It is idempotent, and a no-op for an order the gate admitted; it returns
// the units taken.
//
// An order whose SKUs Take found all unarmed within UnarmedFor is not counted, and Redis is
// not asked: outside a sale that is every order. Such a lock is missed only when its SKU was
// armed by another process in that second and the arming found the unit still available; the
// gate then admits one buyer too many, whom the database rejects, until the gate job corrects
// the count. Arm a sale's SKUs ahead of it (the prewarm) and none is.
func (g *Gate) TakeLocked(ctx context.Context, orderID string, lines []Line) (int64, error) {
	if g == nil || g.unarmed.all(lines, g.now()) {
		return 0, nil
	}
	keys, args := g.orderArgs(orderID, lines)
	res, err := g.do(ctx, func(ctx context.Context) (any, error) { return takeLocked.Run(ctx, g.rdb, keys, args...).Int64() })
	if err != nil {
		return 0, fmt.Errorf("gate take locked %s: %w", orderID, err)
	}
	n, _ := res.(int64)
	return n, nil
}

// orderArgs are the keys and arguments of take and takeLocked for order id's lines.
func (g *Gate) orderArgs(orderID string, lines []Line) (keys []string, args []any) {
	keys = make([]string, 0, 1+2*len(lines))
	args = make([]any, 0, 2+2*len(lines))
	keys = append(keys, orderKey(orderID))
	args = append(args, orderID, g.ms())
	for _, l := range lines {
		keys = append(keys, gateKey(l.SKU), heldKey(l.SKU))
		args = append(args, l.Qty, l.SKU)
	}
	return keys, args
}

// giveBack: KEYS[1] the order's key; ARGV[1] the order id, ARGV[2] now (ms). Each SKU the
// order took and has not given back gets its quantity back, if the SKU is still armed.
var giveBack = redis.NewScript(`
local skus = redis.call('GET', KEYS[1])
if not skus then return 0 end
local order, back = ARGV[1], 0
for sku in string.gmatch(skus, '[^\n]+') do
  local g, h = 'sf:gate:{' .. sku .. '}', 'sf:gate:{' .. sku .. '}:held'
  local v = redis.call('HGET', h, order)
  if v and string.sub(v, 1, 2) ~= 'r:' then
    local q = tonumber(string.match(v, '^(%d+)'))
    redis.call('HSET', h, order, 'r:' .. v)
    if redis.call('EXISTS', g) == 1 then
      redis.call('HINCRBY', g, 'remaining', q)
      back = back + q
    end
  end
end
return back
`)

// GiveBack returns what order id took from the gate: its lock was rejected, or released, or
// its units restocked. It is idempotent: a second call for the order gives back nothing. It
// returns the units given back.
func (g *Gate) GiveBack(ctx context.Context, orderID string) (int64, error) {
	if g == nil {
		return 0, nil
	}
	res, err := g.do(ctx, func(ctx context.Context) (any, error) {
		return giveBack.Run(ctx, g.rdb, []string{orderKey(orderID)}, orderID, g.ms()).Int64()
	})
	if err != nil {
		return 0, fmt.Errorf("gate give back %s: %w", orderID, err)
	}
	n, _ := res.(int64)
	return n, nil
}

// Hold is a take the gate still counts as holding units: qty of sku for an order, since when.
type Hold struct {
	OrderID string
	Qty     int64
	TakenAt time.Time
}

// State is a SKU's gate as Redis has it.
type State struct {
	SKU       string
	Armed     bool
	Remaining int64
	ArmedAt   time.Time
	Held      []Hold // takes not given back
}

// snapshot: KEYS[1] gate, KEYS[2] held: remaining, armed_at and the held hash, read at once.
var snapshot = redis.NewScript(`
local g = redis.call('HMGET', KEYS[1], 'remaining', 'armed_at')
if not g[1] then return {} end
return {g[1], g[2], redis.call('HGETALL', KEYS[2])}
`)

// State reads sku's gate in one atomic step: remaining and held takes agree with each other.
func (g *Gate) State(ctx context.Context, sku string) (State, error) {
	st := State{SKU: sku}
	if g == nil {
		return st, nil
	}
	res, err := g.do(ctx, func(ctx context.Context) (any, error) {
		return snapshot.Run(ctx, g.rdb, []string{gateKey(sku), heldKey(sku)}).Slice()
	})
	if err != nil {
		return st, fmt.Errorf("gate state %s: %w", sku, err)
	}
	out, _ := res.([]any)
	if len(out) != 3 {
		return st, nil // not armed
	}
	st.Armed = true
	st.Remaining, _ = strconv.ParseInt(fmt.Sprint(out[0]), 10, 64)
	if ms, err := strconv.ParseInt(fmt.Sprint(out[1]), 10, 64); err == nil {
		st.ArmedAt = time.UnixMilli(ms).UTC()
	}
	kv, _ := out[2].([]any)
	for i := 0; i+1 < len(kv); i += 2 {
		v := fmt.Sprint(kv[i+1])
		if strings.HasPrefix(v, "r:") {
			continue
		}
		qty, at, _ := strings.Cut(v, ":")
		q, _ := strconv.ParseInt(qty, 10, 64)
		t, _ := strconv.ParseInt(at, 10, 64)
		st.Held = append(st.Held, Hold{OrderID: fmt.Sprint(kv[i]), Qty: q, TakenAt: time.UnixMilli(t).UTC()})
	}
	return st, nil
}

// arm: KEYS[1] gate; ARGV[1] remaining, ARGV[2] now (ms). An armed SKU is left as it is.
var arm = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], 'remaining', ARGV[1], 'armed_at', ARGV[2])
return 1
`)

// Arm arms sku with remaining units to admit (the database's available). An armed SKU is
// left as it is: two armings that both found the SKU unarmed (an operator's and the gate
// job's) must not both set remaining, or the second would hand out again every unit taken
// since the first. A drift is corrected with Adjust, never by arming again.
func (g *Gate) Arm(ctx context.Context, sku string, remaining int64) error {
	if g == nil {
		return fmt.Errorf("gate arm %s: %w: no REDIS_URL", sku, ErrUnavailable)
	}
	if remaining < 0 {
		remaining = 0
	}
	g.unarmed.forget(sku)
	_, err := g.do(ctx, func(ctx context.Context) (any, error) {
		return arm.Run(ctx, g.rdb, []string{gateKey(sku)}, remaining, g.ms()).Result()
	})
	if err != nil {
		return fmt.Errorf("gate arm %s: %w", sku, err)
	}
	return nil
}

// adjust: KEYS[1] gate; ARGV[1] delta. Only an armed SKU changes; remaining never goes below 0.
var adjust = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 0 then return false end
local r = redis.call('HINCRBY', KEYS[1], 'remaining', ARGV[1])
if r < 0 then redis.call('HSET', KEYS[1], 'remaining', 0); r = 0 end
return r
`)

// Adjust moves sku's remaining by delta (a repair: the database says the gate is off by
// delta). It returns the new remaining, and false when sku is not armed.
func (g *Gate) Adjust(ctx context.Context, sku string, delta int64) (int64, bool, error) {
	if g == nil {
		return 0, false, nil
	}
	res, err := g.do(ctx, func(ctx context.Context) (any, error) {
		return adjust.Run(ctx, g.rdb, []string{gateKey(sku)}, delta).Int64()
	})
	if err != nil {
		return 0, false, fmt.Errorf("gate adjust %s: %w", sku, err)
	}
	if res == nil {
		return 0, false, nil
	}
	return res.(int64), true, nil
}

// Disarm removes sku's gate: its orders take the database path again.
func (g *Gate) Disarm(ctx context.Context, sku string) error {
	if g == nil {
		return nil
	}
	_, err := g.do(ctx, func(ctx context.Context) (any, error) {
		return g.rdb.Del(ctx, gateKey(sku), heldKey(sku)).Result()
	})
	if err != nil {
		return fmt.Errorf("gate disarm %s: %w", sku, err)
	}
	return nil
}

// Armed returns the SKUs armed in Redis.
func (g *Gate) Armed(ctx context.Context) ([]string, error) {
	if g == nil {
		return nil, nil
	}
	res, err := g.do(ctx, func(ctx context.Context) (any, error) {
		var skus []string
		iter := g.rdb.Scan(ctx, 0, "sf:gate:{*}", 1000).Iterator()
		for iter.Next(ctx) {
			if k := iter.Val(); !strings.HasSuffix(k, ":held") {
				skus = append(skus, skuOfKey(k))
			}
		}
		return skus, iter.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("gate armed: %w", err)
	}
	skus, _ := res.([]string)
	return skus, nil
}
