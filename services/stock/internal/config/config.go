// Package config is the stock service's configuration, read from the environment.
package config

import (
	"github.com/stockflow/stockflow/pkg/service"
)

// Config is every setting of the stock service.
type Config struct {
	service.Base
}

// Load reads the configuration from environ (os.Environ form) over the service's defaults.
func Load(environ []string) (Config, error) {
	var cfg Config
	if err := service.LoadConfig(&cfg, environ); err != nil {
		return cfg, err
	}
	cfg.Default("127.0.0.1:8082", "postgres://postgres@127.0.0.1:5432/stockflow_stock")
	return cfg, cfg.Validate()
}
