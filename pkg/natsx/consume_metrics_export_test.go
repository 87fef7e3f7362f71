package natsx

import "time"

// SetLagRefresh sets how often the lag gauge asks the server, for a test that must not wait
// 5 s for a fresh figure; restore puts the default back.
func SetLagRefresh(d time.Duration) (restore func()) {
	old := lagRefresh
	lagRefresh = d
	return func() { lagRefresh = old }
}
