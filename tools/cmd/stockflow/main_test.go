package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestNATSSyncInterval(t *testing.T) {
	for _, tc := range []struct {
		env, want string
		ok        bool
	}{
		{"", "always", true},
		{"always", "always", true},
		{"2m", "2m", true},
		{"250ms", "250ms", true},
		{"never", "", false},
		{"0s", "", false},
		{"-1m", "", false},
		{"120", "", false}, // a bare number would be seconds to nats-server, a size to its lexer
	} {
		got, err := natsSyncInterval(func(string) string { return tc.env })
		assert.Equal(t, tc.want, got, tc.env)
		assert.Equal(t, tc.ok, err == nil, "%q: %v", tc.env, err)
	}
}
