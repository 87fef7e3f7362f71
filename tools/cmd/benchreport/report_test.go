package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testdata/bench.txt is hand-written in go test's format (two counts of every benchmark,
// figures chosen so the ratios are easy to check by hand).

func TestRatiosAreEngineOverNaiveMeans(t *testing.T) {
	f, err := os.Open("testdata/bench.txt")
	require.NoError(t, err)
	defer f.Close()
	results, err := parse(f, &bytes.Buffer{})
	require.NoError(t, err)
	require.Len(t, results, 20)
	assert.Equal(t, result{bench: "LockHotSKU", path: "naive", clients: 1, iters: 5000, locksPerSec: 1950, p99ms: 1.2}, results[0])

	var lines []string
	for _, r := range ratios(results) {
		lines = append(lines, r.String())
	}
	assert.Equal(t, []string{
		// 2000 / 2000; the rounds 2000/1950 and 2000/2050
		"hot-sku engine/naive clients=1: 1.0x (per round 1.0–1.0x over 2; naive 1950–2050 locks/s, engine 2000–2000)",
		// 8500 / 800; 8000/800 and 9000/800
		"hot-sku engine/naive clients=8: 10.6x (per round 10.0–11.2x over 2; naive 800–800 locks/s, engine 8000–9000)",
		// 16500 / 280; 16000/270 = 59.3 and 17000/290 = 58.6
		"hot-sku engine/naive clients=64: 58.9x (per round 58.6–59.3x over 2; naive 270–290 locks/s, engine 16000–17000)",
		// 18500 / 250; 18000/250 and 19000/250
		"hot-sku engine/naive clients=256: 74.0x (per round 72.0–76.0x over 2; naive 250–250 locks/s, engine 18000–19000)",
		// 7250 / 2100; 7000/2000 and 7500/2200
		"zipf engine/naive clients=64: 3.5x (per round 3.4–3.5x over 2; naive 2000–2200 locks/s, engine 7000–7500)",
	}, lines)
}

func TestMissingSideIsReportedNotHidden(t *testing.T) {
	in := "BenchmarkLockHotSKU/naive/clients=64-2 \t 100 \t 1000 ns/op \t 270.0 locks/s \t 480.0 p99-ms\n" +
		"BenchmarkLockHotSKU/engine/clients=512-2 \t 100 \t 1000 ns/op \t 9000 locks/s \t 30.0 p99-ms\n"
	results, err := parse(strings.NewReader(in), &bytes.Buffer{})
	require.NoError(t, err)
	byLine := map[string]error{}
	for _, r := range ratios(results) {
		byLine[r.String()] = r.err
	}
	assert.Len(t, byLine, 6, "the four wanted clients values, the extra 512, and zipf")
	assert.Contains(t, byLine, "hot-sku engine/naive clients=64: n/a (LockHotSKU clients=64: 1 naive and 0 engine results)")
	assert.Contains(t, byLine, "hot-sku engine/naive clients=512: n/a (LockHotSKU clients=512: 0 naive and 1 engine results)")
}

func TestReportEchoesInputThenTableThenRatios(t *testing.T) {
	raw, err := os.ReadFile("testdata/bench.txt")
	require.NoError(t, err)
	var out bytes.Buffer
	err = run(context.Background(), bytes.NewReader(raw), &out, &bytes.Buffer{}, func(string) string { return "" })
	require.ErrorContains(t, err, "DATABASE_URL is not set", "the settings are part of a result")

	got := out.String()
	require.True(t, strings.HasPrefix(got, string(raw)), "raw lines first")
	rest := got[len(raw):]
	assert.Contains(t, rest, "nproc: ")
	assert.Regexp(t, `LockHotSKU/clients=64\s+280 ± 4%\s+16500 ± 3%`, rest, "locks/s table, naive then engine")
	assert.Regexp(t, `LockZipf/clients=64\s+87.5 ± 3%\s+19.5 ± 3%`, rest, "p99-ms table")
	assert.Less(t, strings.Index(rest, "old p99-ms"), strings.Index(rest, "hot-sku engine/naive clients=1: 1.0x"))
	assert.True(t, strings.HasSuffix(rest, "zipf engine/naive clients=64: 3.5x (per round 3.4–3.5x over 2; naive 2000–2200 locks/s, engine 7000–7500)\n"))
}
