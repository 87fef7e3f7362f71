package launcher

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/url"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// redisAnswers reports whether a Redis answers PING at addr (host:port).
func redisAnswers(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return false
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	return err == nil && strings.HasPrefix(line, "+PONG")
}

// ensureRedis returns the Redis URL of the flash-sale gate: o.RedisURL when it answers, else
// this checkout's throwaway redis-server (nothing on disk) on o.RedisPort. Redis is optional:
// without redis-server installed the gate is off (every order takes the database path) and
// ensureRedis says so and returns "". REDIS_URL=off turns the gate off on purpose.
func ensureRedis(_ context.Context, o Options) (string, error) {
	if o.RedisURL == "off" {
		return "", nil
	}
	if o.RedisURL != "" {
		if u, err := url.Parse(o.RedisURL); err == nil && redisAnswers(u.Host) {
			return o.RedisURL, nil
		}
		o.Log("REDIS_URL %s does not answer; starting a throwaway redis-server", o.RedisURL)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", o.RedisPort)
	own := "redis://" + addr + "/0"
	if pid := readPid(o.path("pids", "redis.pid")); pid > 0 && Alive(pid) && redisAnswers(addr) {
		return own, nil // ours, from an earlier up
	}
	if portFree(addr, 0) != nil {
		return "", fmt.Errorf("port %d is taken by another server (another checkout's `make up`? run `make down` there, or set STOCKFLOW_PORT_OFFSET)", o.RedisPort)
	}
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		o.Log("redis-server is not installed (apt-get install redis-server): the flash-sale gate is off, every order takes the database path")
		return "", nil
	}
	cmd := exec.Command(bin, "--port", strconv.Itoa(o.RedisPort), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
	if _, err := spawn(o, "redis", cmd); err != nil {
		return "", err
	}
	for range 100 {
		if redisAnswers(addr) {
			return own, nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return "", fmt.Errorf("redis-server did not start; see %s", o.path("logs", "redis.log"))
}

// StopRedis kills the throwaway redis-server Up started (a Redis outage, for tests); its
// data is gone, as after a crash of a Redis that keeps nothing on disk.
func (s *System) StopRedis() error {
	pid := readPid(s.opts.path("pids", "redis.pid"))
	if pid <= 0 {
		return fmt.Errorf("stop redis: this system started no redis-server")
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("stop redis: %w", err)
	}
	waitGone(pid, 5*time.Second)
	return nil
}

// StartRedis starts the throwaway redis-server again, empty, on its port.
func (s *System) StartRedis(ctx context.Context) error {
	o := s.opts
	o.RedisURL = ""
	_, err := ensureRedis(ctx, o)
	return err
}
