// The supervisor: `make up` keeps the four services alive as Kubernetes would (restartPolicy
// Always, with its crash-loop backoff), from a process of its own that outlives the command.

package launcher

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// Restart backoff: a service that exits is started again after backoffMin, doubling at each
// exit up to backoffMax; one that stayed up backoffReset starts over at backoffMin.
const (
	backoffMin   = time.Second
	backoffMax   = 30 * time.Second
	backoffReset = time.Minute
)

// Supervised is the supervisor's record of one service, kept in RunDir/supervisor.json for
// `stockflow status`.
type Supervised struct {
	PID      int       `json:"pid"`
	Started  time.Time `json:"started"`
	Restarts int       `json:"restarts"`
	LastExit string    `json:"last_exit,omitempty"` // "signal: killed", "exit status 1"
	ExitedAt time.Time `json:"exited_at,omitzero"`
}

// UpSupervised is Up with the services run by a supervisor process (the stockflow binary,
// built into RunDir/bin, running `supervise`) instead of by this one: they are restarted with
// backoff when they die and keep running after the caller exits. Down stops the supervisor
// first, which stops them.
func UpSupervised(ctx context.Context, o Options) (*System, error) {
	o.defaults()
	s, err := prepare(ctx, o)
	if err != nil {
		return nil, err
	}
	if pid := readPid(o.path("pids", "supervisor.pid")); pid > 0 && Alive(pid) {
		return nil, fmt.Errorf("a supervisor (pid %d) of this checkout runs already: `make down` first", pid)
	}
	if err := Build(ctx, o, Services...); err != nil {
		return nil, err
	}
	if err := build(ctx, o, "./tools/cmd/stockflow", consolePkg); err != nil {
		return nil, err
	}
	// The supervisor must start the services on the ports the caller waits on.
	s.opts.Ports = maps.Clone(s.opts.Ports)
	for _, svc := range Services {
		if err := s.reserve(svc); err != nil {
			return nil, err
		}
		s.opts.Ports[svc] = s.port(svc)
	}
	optsFile := o.path("supervisor.options.json")
	b, err := json.Marshal(s.opts)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(optsFile, b, 0o600); err != nil { // Env may hold secrets
		return nil, err
	}
	cmd := exec.Command(o.path("bin", "stockflow"), "supervise", optsFile)
	cmd.Dir = o.Root
	exited, err := spawn(o, "supervisor", cmd)
	if err != nil {
		return nil, err
	}
	for _, svc := range Services {
		if err := s.waitURL(ctx, svc, 60*time.Second, exited); err != nil {
			return s, fmt.Errorf("%w (supervisor log: %s)", err, o.path("logs", "supervisor.log"))
		}
	}
	s.PaysimURL = fmt.Sprintf("http://127.0.0.1:%d", o.PaysimPort) // started with payment-adapter
	if s.ConsoleURL, err = startConsole(ctx, s.opts, s.URLs); err != nil {
		return s, err
	}
	return s, nil
}

// Supervise is the supervisor process: it reads the Options UpSupervised wrote, starts the
// services and restarts each that exits, with backoff, until ctx ends (SIGTERM from Down); then
// it stops them, each with SIGTERM and, after its drain time, SIGKILL.
func Supervise(ctx context.Context, optsFile string, log io.Writer) error {
	b, err := os.ReadFile(optsFile)
	if err != nil {
		return err
	}
	var o Options
	if err := json.Unmarshal(b, &o); err != nil {
		return fmt.Errorf("supervisor options %s: %w", optsFile, err)
	}
	o.Log = func(f string, a ...any) { fmt.Fprintf(log, time.Now().Format(time.TimeOnly)+" "+f+"\n", a...) }
	o.defaults()
	s, err := prepare(ctx, o)
	if err != nil {
		return err
	}
	state := map[string]*Supervised{}
	exits := make(chan string)
	restart := make(chan string)
	backoff := map[string]time.Duration{}
	start := func(svc string) {
		rec := state[svc]
		if rec == nil {
			rec = &Supervised{}
			state[svc] = rec
		}
		rec.Started = time.Now()
		if err := s.Start(ctx, svc); err != nil {
			rec.LastExit, rec.ExitedAt = "start failed: "+err.Error(), time.Now()
			go func() { exits <- svc }()
			return
		}
		p := s.procs[svc]
		rec.PID = p.cmd.Process.Pid
		go func() { <-p.exited; exits <- svc }()
	}
	for _, svc := range Services {
		start(svc)
	}
	s.writeState(state)
	o.Log("supervising %v", Services)
	for {
		select {
		case <-ctx.Done():
			o.Log("stopping")
			return s.stopAll()
		case svc := <-exits:
			rec := state[svc]
			if p := s.procs[svc]; p != nil && p.cmd.ProcessState != nil {
				rec.LastExit, rec.ExitedAt = p.cmd.ProcessState.String(), time.Now()
				delete(s.procs, svc)
			}
			up := rec.ExitedAt.Sub(rec.Started)
			wait := min(max(backoff[svc]*2, backoffMin), backoffMax)
			if up >= backoffReset {
				wait = backoffMin
			}
			backoff[svc] = wait
			o.Log("%s exited (%s) after %s; restart %d in %s", svc, rec.LastExit, up.Round(time.Millisecond), rec.Restarts+1, wait)
			s.writeState(state)
			time.AfterFunc(wait, func() {
				select {
				case restart <- svc:
				case <-ctx.Done():
				}
			})
		case svc := <-restart:
			state[svc].Restarts++
			start(svc)
			s.writeState(state)
		}
	}
}

// stopAll stops every running service: SIGTERM to its process group, SIGKILL when it has not
// drained in time.
func (s *System) stopAll() error {
	var errs []error
	for svc, p := range s.procs {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(20 * time.Second):
			errs = append(errs, fmt.Errorf("%s did not stop in 20 s: killed", svc))
			_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
			<-p.exited
		}
		errs = append(errs, os.Remove(s.opts.path("pids", svc+".pid")))
	}
	return errors.Join(errs...)
}

func (s *System) writeState(state map[string]*Supervised) {
	b, err := json.MarshalIndent(state, "", "  ")
	if err == nil {
		err = os.WriteFile(s.opts.path("supervisor.json"), b, 0o644)
	}
	if err != nil {
		s.opts.Log("supervisor state: %v", err)
	}
}

// readSupervised is the supervisor's record, if one ran.
func readSupervised(o Options) map[string]Supervised {
	b, err := os.ReadFile(o.path("supervisor.json"))
	if err != nil {
		return nil
	}
	var state map[string]Supervised
	if json.Unmarshal(b, &state) != nil {
		return nil
	}
	return state
}
