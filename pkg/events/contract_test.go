package events_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stockflow/stockflow/pkg/events"
)

// The compatibility promise across releases (events.ContractVersion): services built from
// different releases of this package run together during every rollout, in either order.
// testdata/v<major>.<minor>/ holds what each release writes; these tests hold today's code to
// every folder still there.
//
// v1.0 is the first release: every payload has carried today's fields since the contract's
// first commit (git log -p -- pkg/events: later commits tightened validation and added
// StockOrder, an HTTP body, not an event), so its fixtures are the ones the package always
// had, moved into the folder. v1.1 adds payment.refund_requested (payment-adapter's own
// two-step refund); every other fixture is v1.0's. v1.2 adds payment.nothing_to_refund (the
// answer to an order refund no payment paid, review F12); the rest are v1.1's.

// currentRelease is the folder of the fixtures this build writes.
var currentRelease = filepath.Join("testdata", "v"+events.ContractVersion)

type release struct {
	name         string // v1.0
	major, minor int
	dir          string
}

var releaseName = regexp.MustCompile(`^v(\d+)\.(\d+)$`)

// releases lists the fixture folders, oldest first.
func releases(t *testing.T) []release {
	t.Helper()
	dirs, err := filepath.Glob(filepath.Join("testdata", "v*"))
	require.NoError(t, err)
	var rs []release
	for _, dir := range dirs {
		m := releaseName.FindStringSubmatch(filepath.Base(dir))
		require.NotNil(t, m, "%s is not named v<major>.<minor>", dir)
		major, _ := strconv.Atoi(m[1])
		minor, _ := strconv.Atoi(m[2])
		rs = append(rs, release{name: m[0], major: major, minor: minor, dir: dir})
	}
	slices.SortFunc(rs, func(a, b release) int {
		if a.major != b.major {
			return a.major - b.major
		}
		return a.minor - b.minor
	})
	require.NotEmpty(t, rs, "no fixture folder testdata/v<major>.<minor>/")
	return rs
}

// eachFixture runs f for every fixture of r with the contract entry of its event.
func eachFixture(t *testing.T, r release, f func(t *testing.T, body []byte, decode decoder, want events.Event)) {
	files, err := filepath.Glob(filepath.Join(r.dir, "*.json"))
	require.NoError(t, err)
	require.NotEmpty(t, files, "%s has no fixtures", r.dir)
	for _, file := range files {
		subject := strings.TrimSuffix(filepath.Base(file), ".json")
		t.Run(r.name+"/"+subject, func(t *testing.T) {
			i := -1
			for j, c := range contract {
				if c.want.Subject() == subject {
					i = j
				}
			}
			require.GreaterOrEqual(t, i, 0, "%s is an event of release %s that this build no longer knows: "+
				"events are not removed within a major", subject, r.name)
			body, err := os.ReadFile(file)
			require.NoError(t, err)
			f(t, body, contract[i].decode, contract[i].want)
		})
	}
}

func TestContractVersionNamesTheNewestRelease(t *testing.T) {
	rs := releases(t)
	newest := rs[len(rs)-1]
	assert.Equal(t, "v"+events.ContractVersion, newest.name,
		"the newest fixture folder is the release this build writes (ContractVersion %s): bump it and add the folder together", events.ContractVersion)
	assert.Equal(t, events.SchemaVersion, newest.major, "ContractVersion's major is SchemaVersion")
	for _, r := range rs {
		assert.LessOrEqual(t, r.major, events.SchemaVersion, "%s is of a major this build cannot read", r.name)
	}
}

// TestEveryReleaseDecodes: a consumer released after the producer. Every fixture of every
// release still decodes with today's code, and nothing it says is lost: today's encoding of
// the decoded event carries every field of the fixture with the same value.
func TestEveryReleaseDecodes(t *testing.T) {
	for _, r := range releases(t) {
		eachFixture(t, r, func(t *testing.T, body []byte, decode decoder, _ events.Event) {
			env, ev, err := decode(body)
			require.NoError(t, err)
			assert.Equal(t, r.major, env.SchemaVersion, "a %s fixture is written with schema_version %d", r.name, r.major)
			again, err := events.EncodeWithID(env.ID, ev, env.OccurredAt)
			require.NoError(t, err)
			assert.Empty(t, fieldsMissing("", generic(t, body), generic(t, again.Data), true),
				"today's code drops what a %s producer writes", r.name)
		})
	}
}

// TestEveryReleaseReadsTodaysEncoding: a consumer released before the producer. The older
// consumer ignores fields it does not know, refuses a schema_version above its major, and needs
// every field its release writes: today's encoding of each event must carry every field of
// that release's fixture with the same JSON type (added fields are fine).
func TestEveryReleaseReadsTodaysEncoding(t *testing.T) {
	at := time.Date(2026, 3, 1, 10, 15, 30, 123456000, time.UTC)
	for _, r := range releases(t) {
		eachFixture(t, r, func(t *testing.T, body []byte, _ decoder, want events.Event) {
			m, err := events.EncodeWithID("0195a1b2-0000-7000-8000-0000000000ff", want, at)
			require.NoError(t, err)
			today := generic(t, m.Data).(map[string]any)
			assert.LessOrEqual(t, today["schema_version"], float64(r.major),
				"a %s consumer refuses schema_version %v: a new major is published beside the old one", r.name, today["schema_version"])
			assert.Empty(t, fieldsMissing("", generic(t, body), today, false),
				"today's encoding lacks or retypes fields a %s consumer reads", r.name)
		})
	}
}

// TestCompatibilityCheckCatchesBreakingChanges shows the checks above fail on the changes
// the promise forbids, made to today's encoding of order.created, and pass on additions.
func TestCompatibilityCheckCatchesBreakingChanges(t *testing.T) {
	body := fixture(t, events.SubjectOrderCreated)
	fixed, err := events.Open(body)
	require.NoError(t, err)
	m, err := events.EncodeWithID(fixed.ID, contract[0].want, fixed.OccurredAt)
	require.NoError(t, err)
	old := generic(t, body)
	require.Empty(t, fieldsMissing("", old, generic(t, m.Data), true), "today's encoding is the fixture")
	tests := []struct {
		name   string
		change func(env, data map[string]any)
		broken []string // fieldsMissing's findings, shape only
	}{
		{"a field added", func(env, data map[string]any) {
			data["coupon"] = "SPRING"
			data["items"].([]any)[0].(map[string]any)["gift_wrap"] = true
			env["trace_note"] = "x"
		}, nil},
		{"a field renamed", func(_, data map[string]any) {
			data["buyer"] = data["buyer_id"]
			delete(data, "buyer_id")
		}, []string{"data.buyer_id: missing"}},
		{"a nested field removed", func(_, data map[string]any) {
			delete(data["items"].([]any)[1].(map[string]any), "unit_price")
		}, []string{"data.items[1].unit_price: missing"}},
		{"a number became a string", func(_, data map[string]any) { data["total"] = "84.98" }, []string{"data.total: number became string"}},
		{"an object became a list", func(env, _ map[string]any) { env["data"] = []any{} }, []string{"data: object became array"}},
		{"the envelope lost occurred_at", func(env, _ map[string]any) { delete(env, "occurred_at") }, []string{"occurred_at: missing"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			env := generic(t, m.Data).(map[string]any)
			data, _ := env["data"].(map[string]any)
			tc.change(env, data)
			assert.Equal(t, tc.broken, fieldsMissing("", old, env, false))
		})
	}

	t.Run("a value lost in decoding", func(t *testing.T) {
		env := generic(t, m.Data).(map[string]any)
		env["data"].(map[string]any)["currency"] = "USD"
		assert.Equal(t, []string{`data.currency: "EUR" became "USD"`}, fieldsMissing("", old, env, true))
	})
	t.Run("an omitted zero value is not lost", func(t *testing.T) {
		withZero := map[string]any{"order_id": "ord-1", "relocked": false}
		assert.Empty(t, fieldsMissing("", withZero, map[string]any{"order_id": "ord-1"}, true))
		assert.NotEmpty(t, fieldsMissing("", withZero, map[string]any{"order_id": "ord-1"}, false))
	})
}

// fieldsMissing lists, as JSON paths, the fields of old that new lacks or holds with another
// JSON type; with sameValue, also those it holds with another value (a field old holds at its
// zero value may then be missing: omitempty leaves it out, and decoding it absent gives zero).
// A list's elements are compared with the element of new at the same index, or its last one.
func fieldsMissing(path string, old, new any, sameValue bool) []string {
	switch o := old.(type) {
	case map[string]any:
		n, ok := new.(map[string]any)
		if !ok {
			return []string{fmt.Sprintf("%s: object became %s", orRoot(path), jsonType(new))}
		}
		var out []string
		for _, k := range sortedKeys(o) {
			p := k
			if path != "" {
				p = path + "." + k
			}
			nv, present := n[k]
			switch {
			case present:
				out = append(out, fieldsMissing(p, o[k], nv, sameValue)...)
			case !sameValue || !isZero(o[k]):
				out = append(out, p+": missing")
			}
		}
		return out
	case []any:
		n, ok := new.([]any)
		switch {
		case !ok:
			return []string{fmt.Sprintf("%s: array became %s", orRoot(path), jsonType(new))}
		case sameValue && len(n) != len(o):
			return []string{fmt.Sprintf("%s: %d elements became %d", orRoot(path), len(o), len(n))}
		case len(o) > 0 && len(n) == 0:
			return []string{path + ": empty, nothing to compare its elements with"}
		}
		var out []string
		for i, e := range o {
			out = append(out, fieldsMissing(fmt.Sprintf("%s[%d]", path, i), e, n[min(i, len(n)-1)], sameValue)...)
		}
		return out
	case nil:
		return nil // null says nothing of a type
	default:
		if jsonType(old) != jsonType(new) {
			return []string{fmt.Sprintf("%s: %s became %s", orRoot(path), jsonType(old), jsonType(new))}
		}
		if sameValue && old != new {
			return []string{fmt.Sprintf("%s: %s became %s", orRoot(path), jsonText(old), jsonText(new))}
		}
		return nil
	}
}

func generic(t *testing.T, body []byte) any {
	t.Helper()
	var v any
	require.NoError(t, json.Unmarshal(body, &v))
	return v
}

func jsonType(v any) string {
	switch v.(type) {
	case map[string]any:
		return "object"
	case []any:
		return "array"
	case string:
		return "string"
	case float64:
		return "number"
	case bool:
		return "bool"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%T", v)
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func isZero(v any) bool {
	switch v := v.(type) {
	case map[string]any:
		return len(v) == 0
	case []any:
		return len(v) == 0
	case string:
		return v == ""
	case float64:
		return v == 0
	case bool:
		return !v
	}
	return v == nil
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func orRoot(path string) string {
	if path == "" {
		return "(body)"
	}
	return path
}
