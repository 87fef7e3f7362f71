// The supervisor: `make up` keeps the four services alive as Kubernetes would (restartPolicy
// Always, with its crash-loop backoff), from a process of its own that outlives the command;
// with several replicas it runs their fronts too.

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

// Supervised is the supervisor's record of one service process ("stock", "stock-2"), kept in
// RunDir/supervisor.json for `stockflow status`.
type Supervised struct {
	PID      int       `json:"pid"`
	URL      string    `json:"url,omitempty"` // where the process itself answers
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
	// The supervisor must start the services (and their fronts) on the ports the caller waits on.
	s.opts.Ports = maps.Clone(s.opts.Ports)
	s.opts.ReplicaPorts = maps.Clone(s.opts.ReplicaPorts)
	if s.opts.ReplicaPorts == nil {
		s.opts.ReplicaPorts = map[string]int{}
	}
	for _, name := range s.processes() {
		if err := s.reserveProcess(name); err != nil {
			return nil, err
		}
		svc, _, _ := replicaOf(name)
		s.opts.Ports[svc] = s.port(svc)
		if s.opts.Replicas > 1 {
			s.opts.ReplicaPorts[name] = portOf(s.procURLs[name])
		}
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
	for _, name := range s.processes() {
		if err := s.waitURL(ctx, name, s.procURLs[name], 60*time.Second, exited); err != nil {
			return s, fmt.Errorf("%w (supervisor log: %s)", err, o.path("logs", "supervisor.log"))
		}
	}
	if s.opts.Replicas > 1 {
		for _, svc := range Services { // and the fronts before them
			if err := s.waitURL(ctx, "the front of "+svc, s.URLs[svc], 10*time.Second, exited); err != nil {
				return s, fmt.Errorf("%w (supervisor log: %s)", err, o.path("logs", "supervisor.log"))
			}
		}
	}
	s.PaysimURL = fmt.Sprintf("http://127.0.0.1:%d", o.PaysimPort) // started with payment-adapter
	if s.ConsoleURL, err = startConsole(ctx, s.opts, s.URLs); err != nil {
		return s, err
	}
	return s, nil
}

// Supervise is the supervisor process: it reads the Options UpSupervised wrote, starts the
// service processes with the fronts of several replicas, and restarts each process that exits, with
// backoff, until ctx ends (SIGTERM from Down); then it closes the fronts and stops the
// processes, each with SIGTERM and, after its drain time, SIGKILL.
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
	start := func(name string) {
		rec := state[name]
		if rec == nil {
			rec = &Supervised{}
			state[name] = rec
		}
		rec.Started = time.Now()
		if err := s.Start(ctx, name); err != nil {
			rec.LastExit, rec.ExitedAt = "start failed: "+err.Error(), time.Now()
			go func() { exits <- name }()
			return
		}
		p := s.procs[name]
		rec.PID, rec.URL = p.cmd.Process.Pid, s.procURLs[name]
		go func() { <-p.exited; exits <- name }()
	}
	all := s.processes()
	for _, name := range all {
		start(name)
	}
	s.writeState(state)
	o.Log("supervising %v", all)
	for {
		select {
		case <-ctx.Done():
			o.Log("stopping")
			return errors.Join(s.closeFronts(), s.stopAll())
		case name := <-exits:
			rec := state[name]
			if p := s.procs[name]; p != nil && p.cmd.ProcessState != nil {
				rec.LastExit, rec.ExitedAt = p.cmd.ProcessState.String(), time.Now()
				delete(s.procs, name)
			}
			up := rec.ExitedAt.Sub(rec.Started)
			wait := min(max(backoff[name]*2, backoffMin), backoffMax)
			if up >= backoffReset {
				wait = backoffMin
			}
			backoff[name] = wait
			o.Log("%s exited (%s) after %s; restart %d in %s", name, rec.LastExit, up.Round(time.Millisecond), rec.Restarts+1, wait)
			s.writeState(state)
			time.AfterFunc(wait, func() {
				select {
				case restart <- name:
				case <-ctx.Done():
				}
			})
		case name := <-restart:
			state[name].Restarts++
			start(name)
			s.writeState(state)
		}
	}
}

// stopAll stops every running service process: SIGTERM to its process group, SIGKILL when it
// has not drained in time.
func (s *System) stopAll() error {
	var errs []error
	for _, p := range s.procs { // all at once: they drain side by side
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	}
	deadline := time.Now().Add(20 * time.Second)
	for name, p := range s.procs {
		select {
		case <-p.exited:
		case <-time.After(time.Until(deadline)):
			errs = append(errs, fmt.Errorf("%s did not stop in 20 s: killed", name))
			_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
			<-p.exited
		}
		errs = append(errs, os.Remove(s.opts.path("pids", name+".pid")))
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

// readSupervisorOptions are the Options the last UpSupervised gave its supervisor.
func readSupervisorOptions(o Options) (Options, bool) {
	b, err := os.ReadFile(o.path("supervisor.options.json"))
	if err != nil {
		return Options{}, false
	}
	var up Options
	return up, json.Unmarshal(b, &up) == nil
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
