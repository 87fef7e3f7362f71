// Package reconcile runs compensation and reconciliation jobs (DESIGN §6): each job compares a
// service's records with the truth it depends on and, in repair mode, fixes what differs
// through the service's normal use cases (ledger rows and outbox events, never a silent
// UPDATE). A Runner runs a job at most once at a time across every replica of a service (a
// PostgreSQL session advisory lock), keeps each run in the reconcile_run table, counts
// findings and repairs in OpenTelemetry counters, and serves the admin API and the schedules.
package reconcile

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"time"

	"github.com/stockflow/stockflow/pkg/postgres"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Schema creates the reconcile_run table. pkg/service adds it to every service's database.
var Schema = postgres.MigrationsSchema("reconcile", migrations)

// Mode says whether a run only reports (Check) or also fixes what it finds (Repair).
type Mode string

// Modes.
const (
	Check  Mode = "check"
	Repair Mode = "repair"
)

// ParseMode returns the mode named s; ErrBadMode for anything but check or repair.
func ParseMode(s string) (Mode, error) {
	switch Mode(s) {
	case Check, Repair:
		return Mode(s), nil
	}
	return "", fmt.Errorf("%w: %q (check or repair)", ErrBadMode, s)
}

// Errors of Runner.Run.
var (
	ErrUnknownJob     = errors.New("unknown reconcile job")
	ErrBadMode        = errors.New("invalid reconcile mode")
	ErrAlreadyRunning = errors.New("reconcile job already running")
)

// Finding is one thing a job found wrong: its kind, the ids that name it, the figures that
// show it, and whether this run repaired it (Error says why a repair failed).
type Finding struct {
	Kind     string            `json:"kind"`
	IDs      map[string]string `json:"ids,omitempty"`
	Values   map[string]int64  `json:"values,omitempty"`
	Detail   string            `json:"detail"`
	Repaired bool              `json:"repaired"`
	Error    string            `json:"error,omitempty"`
}

// Result is what one run of a job returns: how many records it looked at, and its findings.
type Result struct {
	Checked  int
	Findings []Finding
}

// Job is one reconciliation job of a service.
type Job struct {
	// Name is the job's name in the API, the CLI and the runs table (overdue_locks, …).
	Name string
	// Interval is how often the schedule runs the job; 0 turns the schedule off (the API and
	// the CLI still run it).
	Interval time.Duration
	// Run checks, and in Repair mode repairs. A finding it cannot repair is reported with
	// Repaired false; an error means the run itself failed (its findings so far are kept).
	Run func(ctx context.Context, mode Mode) (Result, error)
}

// Report is the outcome of one run: the API's and the CLI's JSON, and a reconcile_run row.
type Report struct {
	ID       int64     `json:"id"`
	Job      string    `json:"job"`
	Mode     Mode      `json:"mode"`
	Trigger  string    `json:"trigger"` // schedule | api | cli
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
	Checked  int       `json:"checked"`
	Found    int       `json:"found"`
	Repaired int       `json:"repaired"`
	Findings []Finding `json:"findings"`
	Error    string    `json:"error,omitempty"`
}
