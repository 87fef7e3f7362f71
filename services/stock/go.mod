module github.com/stockflow/stockflow/services/stock

go 1.26.8

require (
	github.com/stockflow/stockflow/pkg v0.0.0
	go.opentelemetry.io/otel v1.47.0
	go.opentelemetry.io/otel/metric v1.47.0
	go.opentelemetry.io/otel/sdk/metric v1.47.0
)

require (
	github.com/go-kit/kit v0.13.0 // indirect
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	github.com/jackc/pgx/v5 v5.13.0 // indirect
	golang.org/x/text v0.44.0 // indirect
)

// In the monorepo every service builds against the pkg beside it; a release pins a tagged pkg.
replace github.com/stockflow/stockflow/pkg => ../../pkg
