module github.com/stockflow/stockflow/services/console

go 1.26.8

require (
	github.com/caarlos0/env/v11 v11.4.2
	github.com/stockflow/stockflow/pkg v0.0.0
)

// The console imports only pkg's standard-library-only packages (buildinfo, envtag), so it
// links no database or broker client; the replace builds it against the pkg of its commit.
replace github.com/stockflow/stockflow/pkg => ../../pkg
