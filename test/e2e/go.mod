module github.com/stockflow/stockflow/test/e2e

go 1.26.8

require (
	github.com/stockflow/stockflow/pkg v0.0.0
	github.com/stockflow/stockflow/tools v0.0.0
)

replace (
	github.com/stockflow/stockflow/pkg => ../../pkg
	github.com/stockflow/stockflow/tools => ../../tools
)
